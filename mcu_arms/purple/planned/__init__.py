"""The `planned` agent (seed 002): a planner, a policy, an executor and a damage reflex on structured state.

agent.py ties them together; planner.py keeps the plan; policy.py validates each decision; executor.py turns
high-level actions into per-step simulator actions; models.py speaks to the two model services.
"""
