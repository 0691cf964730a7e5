"""The `planned` agent (seed 002): a planner, a policy, an action runner and a damage reflex on structured state.

agent.py ties them together; planner.py keeps the plan; policy.py validates each decision; action_runner.py turns
high-level actions into per-step simulator actions; models.py speaks to the two model services.
"""
