"""The statistics a comparison of arms computes with: pure functions returning typed results, each naming its method.

- design.pairing(sim_a, reset_a, seeds_a, sim_b, reset_b, seeds_b) -> Pairing: "paired" over the seeds both arms
  completed (at least 2, on a simulator whose world is the seed: embedded; MineStudio with reset_mode = "hard"; the
  others `unpartnered`) or "unpaired", with the reason.
- paired.compare_paired(metric, a, b, name_a=, name_b=) -> PairedDifference (a, b: seed -> value): per-seed
  differences, sign_flip_test (exact up to 2^20 signs, else seeded Monte Carlo, (hits+1)/(N+1)),
  basics.mean_interval (Student t) of them, pairing_effect (correlation; paired vs unpaired variance).
- power.seeds_needed_paired(differences, variants=) / power.plan_power(...): seeds for 80 % power by simulation of
  the rule applied (exact sign-flip test, zeros and ties, Holm over the variants); never fewer than n + 1 when n did
  not resolve. sequential.sequential_power(sampler, max_seeds=, batch=, variants=): the same for
  `run --until-resolved`'s stopping rule.
- basics.summarise(values) -> Summary (mean, Student t interval); basics.compare_means(...) -> Difference (Welch t
  interval, permutation test): the unpaired design.
- comparison.compare_metric(metric, a, b, pairing, name_a=, name_b=) -> MetricComparison: paired, or stats/basics.py's
  two-sample test when unpaired; seeds_needed per the design used. comparison.adjust_family(comparisons, family=)
  -> (Holm, comparisons with adjusted_p and the verdict read on it).
- survival.kaplan_meier(times) -> KaplanMeier (curve, Greenwood log-log band, median with CI or None = not reached,
  probability of reaching by the cap; median by R survival's plateau convention); survival.logrank(a, b, paired=)
  -> LogRank (p by permutation: exact up to 20,000 splits or within-seed swaps, else seeded Monte Carlo; none below
  2 episodes per arm); survival.episodes(steps_reached, steps_run) -> [TimeToEvent];
  comparison.compare_milestone(task, identity, a, b) -> MilestoneComparison.
- multiplicity.holm([(name, p | None)], family=) -> Holm (raw and adjusted p, rejected).
- sequential.sequential_sign_flip(differences, look_sizes, max_seeds=, alpha=) -> SequentialTest (group-sequential
  exact sign-flip test, Lan–DeMets O'Brien–Fleming spending); sequential.sequential_compare(a, b, look_of_seed,
  design); sequential.resolved(tests); sequential.sequential_experiment([SequentialLook | None]) ->
  SequentialExperiment | None (method, looks taken, alpha allowed: what a fixed-n compare of these episodes must
  say; the alpha each variant's test spent is its SequentialTest's).
- across_tasks.across_tasks({arm: {task: {seed: normalised score}}}, baseline) -> AcrossTasks (rliable's aggregates
  over 2 tasks or more: interquartile mean, probability of improvement, performance profiles, each with a stratified
  bootstrap interval or band; the tasks some arm lacks left out and named).

numpy is imported inside the functions that use it: `compare` is a light command.
"""
