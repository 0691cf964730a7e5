"""What the arms given to `plan` or `run` differ in, said before any compute is spent: a pair that differs in more
than one setting cannot tell which one made the difference, and `compare` would only say so once the runs are done.

The rule is `compare`'s (contracts.settings.differing_settings): seeds and placement never count, and a setting that
only follows another (a model's endpoint with the model) counts once. A campaign's pairs are its baseline and each
variant (its `differs_in` already states and checks them); arms named on their own are paired with each other.
"""

from __future__ import annotations

from itertools import combinations

from pydantic import BaseModel

from mcu_arms.arms.campaign import Selection
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import ArmPlan, Settings, differing_settings


class ArmPair(BaseModel):
    first: str
    second: str
    differing: list[str]  # the settings that make them different experiments, sorted

    @property
    def comparable(self) -> bool:
        return len(self.differing) <= 1

    def text(self) -> str:
        what = ", ".join(self.differing) if self.differing else "nothing (replicates of one experiment)"
        return f"{self.first} vs {self.second}: {what}"


def arm_pairs(plans: list[ArmPlan], selection: Selection) -> list[ArmPair]:
    """The pairs a comparison of these arms would make, each with what its two arms differ in."""
    settings: dict[str, Settings] = {}
    for plan in plans:  # one arm's seeds differ only in the seed: its first episode speaks for it
        settings.setdefault(plan.arm, plan.settings)
    in_campaigns = {name for campaign in selection.campaigns for name in campaign.arm_names()}
    pairs = [
        (campaign.baseline.spec.name, variant.spec.name)
        for campaign in selection.campaigns
        for variant in campaign.variants
    ]
    pairs += list(combinations([arm for arm in settings if arm not in in_campaigns], 2))
    return [
        ArmPair(first=a, second=b, differing=differing_settings([settings[a], settings[b]]))
        for a, b in pairs
        if a in settings and b in settings
    ]


def refuse_incomparable(pairs: list[ArmPair]) -> None:
    """`--strict`: a pair that differs in more than one setting stops the command before anything happens."""
    bad = [pair for pair in pairs if not pair.comparable]
    if bad:
        raise UserError(
            "arms that differ in more than one setting cannot be compared: " + "; ".join(p.text() for p in bad),
            key="--strict",
            allowed="arms that differ in one setting (a campaign's variants state it with differs_in)",
        )
