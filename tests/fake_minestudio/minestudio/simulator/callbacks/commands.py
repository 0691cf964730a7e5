from __future__ import annotations

from minestudio.simulator.callbacks.callback import MinecraftCallback


class CommandsCallback(MinecraftCallback):
    """After every reset, run each command as one env step (env.execute_cmd), then re-wrap obs/info."""

    def __init__(self, commands: list[str]) -> None:
        self.commands = commands

    def after_reset(self, sim, obs, info):
        for command in self.commands:
            raw_obs, _reward, _done, info = sim.env.execute_cmd(command)
            obs.update(raw_obs)
        return sim._wrap_obs_info(obs, info)

    def __repr__(self) -> str:
        return f"CommandsCallback(commands={self.commands})"
