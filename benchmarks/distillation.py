"""On-policy distillation vs RL on the fetch task, at the same rollouts per update.

1. A teacher: the learning recipe with the winners-only warm start (the random policy's won
   games) and RL (`--teacher-updates` updates at lr 1e-4), checkpointed in `--out/teacher`
   (reused when already there).
2. Per seed, four students from the same random-policy warm start and the same games: `rl`
   (GroupMean advantages, PPO, the recipe's reward), `opd` (the Trainer's distillation
   mode, `agentrl.training.distillation`: by default the teacher's most likely token at every
   trained position of the student's own samples, trained by cross entropy in
   `--opd-substeps` optimizer steps an update; `--opd-signal reverse_kl`: the per-token
   advantage teacher logprob - student logprob with `--opd-loss`), `rft` (rejection
   sampling: cross entropy on each update's won trajectories, `agentrl.training.rejection`;
   no teacher) and `imitate` (SFT on the teacher's won trajectories: the teacher plays each
   update's games, `Trainer(behaviour=...)`, and the student trains by cross entropy on the
   won ones). All play the same groups per update (8 games x 8), so an update costs each the
   same rollouts; OPD adds one teacher forward pass per trajectory. Every student but opd
   takes `--substeps` optimizer steps an update (default 4), every one a KL penalty of
   `--kl-coef` (default 0.05) to its warm start.
3. Held-out success every `--eval-every` updates; updates to reach 90% (a run stops at the
   first evaluation that reaches it).

Writes `--out/runs/*.json` (each run's curve), `--out/summary.md` and `--out/curves.png`;
the last line is

    rl_updates_to_90=X opd_updates_to_90=Y speedup=X/Y seeds=N rl_reached=K opd_reached=L
    rft_updates_to_90=Z rft_reached=M imitate_updates_to_90=W imitate_reached=J
    opd_signal=S

(means over seeds; a run that never reached 90% counts as `--updates + --eval-every`, a lower
bound, and is left out of `*_reached`).

    python benchmarks/distillation.py --out runs/distillation            # 3 seeds
    python benchmarks/distillation.py --out runs/distillation --size smoke   # plumbing
    python benchmarks/distillation.py --out runs/distillation --variants imitate  # one more,
                                         # the others read from the earlier call's runs
    python benchmarks/distillation.py --out runs/opdkl --variants rl,opd --substeps 4 \
        --opd-substeps 0 --opd-signal reverse_kl --opd-loss ppo --eval-every 10
                                         # the sampled reverse KL with PPO (docs)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from agentrl.recipes import learning
from agentrl.recipes.fetch import FETCH_TASKS

VARIANTS = ("rl", "opd", "rft", "imitate")
TARGET = 0.9
TEACHER_SEED = 100
TEACHER_LR = 1e-4


def student_setup(args: argparse.Namespace, seed: int) -> learning.LearningSetup:
    """The students' setup (both variants): the preset with `seed`, `--updates`, `--eval-every`."""
    base = learning.BENCHMARK if args.size == "benchmark" else learning.SMOKE
    return replace(
        FETCH_TASKS[args.task](base),
        seed=seed,
        updates=args.updates,
        eval_every=args.eval_every,
        optim_substeps=args.substeps,
        kl_coef=args.kl_coef,
        warmup_updates=args.warmup_updates,
    )


def teacher_setup(args: argparse.Namespace) -> learning.LearningSetup:
    """The teacher's: winners-only warm start, RL at `TEACHER_LR` (the robust fetch setting)."""
    base = learning.BENCHMARK if args.size == "benchmark" else learning.SMOKE
    return replace(
        FETCH_TASKS[args.task](base),
        seed=TEACHER_SEED,
        warm_winners_only=True,
        learning_rate=TEACHER_LR,
        updates=args.teacher_updates,
        eval_every=args.teacher_updates,
    )


def train_teacher(args: argparse.Namespace) -> float:
    """Train (or reuse) the teacher; its held-out success."""
    import torch

    from agentrl.training.checkpoints import latest_checkpoint

    folder = args.out / "teacher"
    result_file = folder / "result.json"
    setup = teacher_setup(args)
    if latest_checkpoint(folder) is not None and result_file.exists():
        saved = json.loads(result_file.read_text())
        size = (saved["setup"]["objects"], saved["setup"]["receptacles"])
        if size != (setup.objects, setup.receptacles):
            raise SystemExit(
                f"{folder} holds a teacher of another task ({size[0]} objects x {size[1]} "
                f"receptacles, not --task {args.task}'s {setup.objects} x "
                f"{setup.receptacles}): use another --out"
            )
        return float(saved["curve"][-1]["success"])
    torch.set_num_threads(args.threads * max(1, args.jobs))
    tokenizer = learning.fetch_tokenizer(setup)
    result = asyncio.run(learning.run_learning(setup, tokenizer, folder, save=True))
    result_file.write_text(json.dumps(asdict(result), indent=2))
    return result.after


def worker(args: argparse.Namespace) -> None:
    """One (variant, seed) student run in this process; writes its JSON result."""
    import torch

    from agentrl.backends.base import LossName
    from agentrl.chat.tokenizers import check_same_tokenizer
    from agentrl.config.names import DistillSignal
    from agentrl.training.distillation import Distillation
    from agentrl.training.rejection import RejectionSampling

    torch.set_num_threads(args.threads)
    setup = student_setup(args, args.seed)
    tokenizer = learning.fetch_tokenizer(setup)
    distillation = None
    if args.variant == "opd":
        teacher_cfg = teacher_setup(args)
        check_same_tokenizer(tokenizer, learning.fetch_tokenizer(teacher_cfg))
        teacher = asyncio.run(learning.load_teacher(teacher_cfg, tokenizer, args.out / "teacher"))
        distillation = Distillation(
            teacher,
            kl_coef=1.0,
            reward_coef=args.opd_reward_coef,
            advantage_clip=args.opd_advantage_clip,
            signal=DistillSignal(args.opd_signal),
        )
        setup = replace(setup, loss=LossName(args.opd_loss))
        if args.opd_learning_rate is not None:
            setup = replace(setup, learning_rate=args.opd_learning_rate)
        if args.opd_substeps:
            setup = replace(setup, optim_substeps=args.opd_substeps)
    behaviour = None
    if args.variant == "imitate":  # SFT on the teacher's won games, played as the others play
        behaviour = asyncio.run(
            learning.load_teacher(teacher_setup(args), tokenizer, args.out / "teacher")
        )
    rejection = RejectionSampling() if args.variant in ("rft", "imitate") else None
    name = f"{args.variant}-seed{args.seed}"

    def point(p: object) -> None:
        print(f"{name} {p}", flush=True)

    async def run() -> learning.LearningResult:
        return await learning.run_learning(
            setup,
            tokenizer,
            args.out / "work" / name,
            on_point=point,
            distillation=distillation,
            rejection=rejection,
            behaviour=behaviour,
            stop_at=TARGET,
        )

    result = asyncio.run(run())
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    (args.out / "runs" / f"{name}.json").write_text(json.dumps(asdict(result), indent=2))


def _launch(args: argparse.Namespace, variant: str, seed: int) -> dict[str, object]:
    command = [sys.executable, __file__, "--worker", "--variant", variant, "--seed", str(seed)]
    command += ["--out", str(args.out), "--size", args.size, "--threads", str(args.threads)]
    command += ["--task", args.task]
    command += ["--updates", str(args.updates), "--eval-every", str(args.eval_every)]
    command += ["--teacher-updates", str(args.teacher_updates), "--substeps", str(args.substeps)]
    command += ["--opd-loss", args.opd_loss, "--kl-coef", str(args.kl_coef)]
    if args.opd_learning_rate is not None:
        command += ["--opd-learning-rate", str(args.opd_learning_rate)]
    command += ["--warmup-updates", str(args.warmup_updates)]
    command += ["--opd-reward-coef", str(args.opd_reward_coef)]
    command += ["--opd-signal", args.opd_signal]
    command += ["--opd-substeps", str(args.opd_substeps)]
    if args.opd_advantage_clip is not None:
        command += ["--opd-advantage-clip", str(args.opd_advantage_clip)]
    log = args.out / "logs" / f"{variant}-seed{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} seed {seed} failed (exit {done.returncode}); see {log}")
    data: dict[str, object] = json.loads(
        (args.out / "runs" / f"{variant}-seed{seed}.json").read_text()
    )
    return data


def _earlier_run(args: argparse.Namespace, variant: str, seed: int) -> dict[str, object]:
    """A run of an earlier call (`--variants` left `variant` out), read from `--out/runs`."""
    path = args.out / "runs" / f"{variant}-seed{seed}.json"
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: --variants left {variant} out and no earlier run of it is in "
            f"{args.out}; run it too (e.g. --variants {variant})"
        )
    data: dict[str, object] = json.loads(path.read_text())
    return data


def updates_to(curve: list[dict[str, float]], target: float) -> int | None:
    """The first evaluated update whose held-out success reaches `target` (None: never)."""
    for point in curve:
        if point["success"] >= target:
            return int(point["update"])
    return None


def summarise(
    args: argparse.Namespace, runs: dict[str, list[dict[str, object]]]
) -> tuple[str, str]:
    """The summary table (markdown) and the last line."""
    cap = args.updates + args.eval_every
    lines = [
        "| variant | seed | before | after | updates to 90% |",
        "|---|---|---|---|---|",
    ]
    means: dict[str, float] = {}
    reached: dict[str, int] = {}
    for variant in VARIANTS:
        counts = []
        for run in runs[variant]:
            curve = run["curve"]
            assert isinstance(curve, list)
            hit = updates_to(curve, TARGET)
            counts.append(cap if hit is None else hit)
            setup = run["setup"]
            assert isinstance(setup, dict)
            shown = f"> {args.updates}" if hit is None else str(hit)
            lines.append(
                f"| {variant} | {setup['seed']} | {curve[0]['success']:.3f} | "
                f"{curve[-1]['success']:.3f} | {shown} |"
            )
        means[variant] = statistics.mean(counts)
        reached[variant] = sum(c < cap for c in counts)
    speedup = means["rl"] / max(means["opd"], 1e-9)
    last = (
        f"rl_updates_to_90={means['rl']:.1f} opd_updates_to_90={means['opd']:.1f} "
        f"speedup={speedup:.2f} seeds={args.seeds} rl_reached={reached['rl']} "
        f"opd_reached={reached['opd']} rft_updates_to_90={means['rft']:.1f} "
        f"rft_reached={reached['rft']} imitate_updates_to_90={means['imitate']:.1f} "
        f"imitate_reached={reached['imitate']} opd_signal={args.opd_signal}"
    )
    return "\n".join(lines) + "\n", last


def plot(runs: dict[str, list[dict[str, object]]], path: Path) -> None:
    """Held-out success per update, every run, coloured by variant."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for variant, colour in zip(
        VARIANTS, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True
    ):
        for k, run in enumerate(runs[variant]):
            curve = run["curve"]
            assert isinstance(curve, list)
            axes.plot(
                [p["update"] for p in curve],
                [p["success"] for p in curve],
                color=colour,
                alpha=0.8,
                label=variant if k == 0 else None,
            )
    axes.axhline(TARGET, color="grey", linestyle=":", linewidth=1)
    axes.set_xlabel("update")
    axes.set_ylabel("held-out success")
    axes.set_ylim(0, 1.02)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/distillation"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--size", choices=("benchmark", "smoke"), default="benchmark")
    parser.add_argument(
        "--task",
        choices=sorted(FETCH_TASKS),
        default="fetch",
        help="fetch: one decision (the object); fetch2: two (object and receptacle), where "
        "the teacher's per-token signal grades each decision and the reward only both",
    )
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--teacher-updates", type=int, default=20)
    parser.add_argument(
        "--substeps",
        type=int,
        default=4,
        help="optimizer steps per update for every student but opd's (TrainConfig."
        "optim_substeps; default 4, RL's best measured)",
    )
    parser.add_argument(
        "--opd-loss",
        choices=("importance_sampling", "ppo"),
        default="importance_sampling",
        help="the opd student's loss (ppo clips the ratio, which bounds how far --substeps move "
        "the weights from the sampling policy within an update)",
    )
    parser.add_argument(
        "--warmup-updates",
        type=int,
        default=0,
        help="every student's linear learning-rate warmup (LearningSetup.warmup_updates)",
    )
    parser.add_argument(
        "--opd-learning-rate",
        type=float,
        default=None,
        help="the opd student's learning rate (default: the recipe's RL rate, every variant's)",
    )
    parser.add_argument(
        "--opd-advantage-clip",
        type=float,
        default=None,
        help="bound on each token's teacher - student gap (Distillation.advantage_clip; "
        "default: none)",
    )
    parser.add_argument(
        "--opd-signal",
        choices=("reverse_kl", "teacher_tokens"),
        default="teacher_tokens",
        help="what the teacher gives the opd student (Distillation.signal): teacher_tokens "
        "(default), its most likely token at every trained position, trained by cross "
        "entropy; reverse_kl, the per-token teacher - student advantage",
    )
    parser.add_argument(
        "--opd-substeps",
        type=int,
        default=16,
        help="optimizer steps per update for the opd student (default 16: cross entropy on "
        "the teacher's labels takes them; 0: --substeps)",
    )
    parser.add_argument(
        "--opd-reward-coef",
        type=float,
        default=0.0,
        help="weight of the env reward's advantage in the opd student's (Distillation."
        "reward_coef; default 0: pure distillation)",
    )
    parser.add_argument(
        "--kl-coef",
        type=float,
        default=0.05,
        help="every student's KL penalty to its warm-started policy (LearningSetup.kl_coef; "
        "default 0.05, which stopped RL's and OPD's collapses)",
    )
    parser.add_argument(
        "--variants",
        default=None,
        help=f"comma-separated subset of {','.join(VARIANTS)} to run (default: all); the "
        "others are read from the runs of an earlier call in --out",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=VARIANTS, default="rl", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in (
        "seeds",
        "jobs",
        "threads",
        "updates",
        "eval_every",
        "teacher_updates",
        "substeps",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.kl_coef < 0:
        parser.error("--kl-coef must be >= 0")
    if args.warmup_updates < 0:
        parser.error("--warmup-updates must be >= 0")
    if args.opd_advantage_clip is not None and args.opd_advantage_clip <= 0:
        parser.error(f"--opd-advantage-clip must be > 0, got {args.opd_advantage_clip}")
    if args.opd_reward_coef < 0:
        parser.error(f"--opd-reward-coef must be >= 0, got {args.opd_reward_coef}")
    if args.opd_substeps < 0:
        parser.error(f"--opd-substeps must be >= 0 (0: --substeps), got {args.opd_substeps}")
    if args.opd_signal == "teacher_tokens" and (
        args.opd_reward_coef or args.opd_advantage_clip is not None
    ):
        parser.error(
            "--opd-signal teacher_tokens trains cross entropy on the teacher's labels: leave "
            "out --opd-reward-coef and --opd-advantage-clip"
        )
    if args.opd_learning_rate is not None and args.opd_learning_rate <= 0:
        parser.error(f"--opd-learning-rate must be > 0, got {args.opd_learning_rate}")
    if args.worker:
        worker(args)
        return
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    teacher = train_teacher(args)
    print(f"teacher: held-out success {teacher:.3f} ({args.out / 'teacher'})", flush=True)
    chosen = VARIANTS if args.variants is None else tuple(args.variants.split(","))
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        parser.error(
            f"--variants: unknown {', '.join(unknown)} (choose from {', '.join(VARIANTS)})"
        )
    jobs = [(v, s) for v in chosen for s in range(args.seeds)]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(lambda job: _launch(args, *job), jobs))
    runs: dict[str, list[dict[str, object]]] = {v: [] for v in VARIANTS}
    for (variant, _), run in zip(jobs, done, strict=True):
        runs[variant].append(run)
    for variant in VARIANTS:
        if variant not in chosen:
            runs[variant] = [_earlier_run(args, variant, seed) for seed in range(args.seeds)]
    table, last = summarise(args, runs)
    minutes = (time.perf_counter() - started) / 60
    summary = f"Teacher held-out success {teacher:.3f}; {minutes:.1f} minutes.\n\n{table}"
    (args.out / "summary.md").write_text(summary)
    plot(runs, args.out / "curves.png")
    print(summary)
    print(last)


if __name__ == "__main__":
    main()
