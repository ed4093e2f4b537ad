"""Assignment solver timings and rule checks at multiples of the Si et al. scale.

python bench/assignment.py --scales 1,10,100 [--seed 0 | --seed 0-9 | --seed 0,3] [--time-limit 300]
    [--topic-choice first|equal]
python bench/assignment.py --smoke    # small scales, in seconds (CI)

"total s" is the solver's wall time, "cpu s" its CPU time (this process, all threads):
on a shared machine the second is the steadier figure. "first share" is the share of reviews by two-topic reviewers that come from their first
choice: high under "first" (preferred), about 0.5 under "equal" (as in Si et al.).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from studies.protocol.assignment import (  # noqa: E402
    Parameters,
    check_rules,
    solve_assignment,
    synthetic_inputs,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--seed", default="0", help="a seed, a range 0-9 or a list 0,3")
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--topic-choice", choices=["first", "equal"], default="first")
    parser.add_argument("--smoke", action="store_true", help="scale 1, one seed: seconds")
    args = parser.parse_args()
    if args.smoke:
        args.scales, args.seed, args.time_limit = "1", "0", 60.0
    header = (
        f"{'scale':>6} {'seed':>4} {'ideas':>6} {'memb':>6} {'revs':>6} {'reviews':>7} {'status':>9} "
        f"{'total s':>8} {'cpu s':>6} {'build':>6} {'milp':>6} {'place':>6} {'vars':>7} {'types':>6} "
        f"{'strategy':>17} {'violations':>10} {'first share':>11}"
    )
    seeds: list[int] = []
    for part in args.seed.split(","):
        lo, _, hi = part.partition("-")
        seeds.extend(range(int(lo), int(hi or lo) + 1))
    print(header)
    for token, seed in ((t, s) for t in args.scales.split(",") for s in seeds):
        scale = float(token)
        inputs = synthetic_inputs(
            scale,
            seed=seed,
            params=Parameters(
                seed=seed, time_limit=args.time_limit, topic_choice=args.topic_choice
            ),
        )
        started, cpu = time.perf_counter(), time.process_time()
        result = solve_assignment(inputs)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        violations = check_rules(result, inputs)
        memberships = sum(len(i.conditions) for i in inputs.ideas)
        st = result.stats
        print(
            f"{scale:>6g} {seed:>4} {len(inputs.ideas):>6} {memberships:>6} {len(inputs.reviewers):>6} "
            f"{len(result.pairs):>7} {result.status:>9} {elapsed:>8.2f} {cpu:>6.2f} "
            f"{st.get('build_seconds', 0):>6.2f} {st.get('milp_seconds', 0):>6.2f} "
            f"{st.get('placement_seconds', 0):>6.2f} {st.get('variables', 0):>7} "
            f"{st.get('reviewer_types', 0):>6} {st.get('strategy', '-'):>17} "
            f"{len(violations):>10} "
            f"{result.objective.get('first_choice_share') or 0:>11.3f}",
            flush=True,
        )
        if not result.feasible:
            print("  " + result.explanation().replace("\n", "\n  "))
        for line in violations[:5]:
            print("  violation:", line)
        print(f"  objective: {result.objective}")


if __name__ == "__main__":
    main()
