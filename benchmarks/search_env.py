"""The search environment's measured claims: the solver against the no-search baseline on
valid_unseen (through the rollout engine, the real Qwen tokenizer), and BM25 query latency at
the shipped corpus size and at a generated corpus of about 100k documents.

    python benchmarks/search_env.py [--queries 400] [--big-docs 100000]

Latency is one `Bm25Index.search(query, k=3)` call (tokenising the query, scoring, top-k),
timed over `--queries` queries: entity names and whole questions, in a fixed order. The big
corpus is the generator's world with every pool scaled up; its generation and indexing times
are printed. The last line is
`solver_success=S nosearch_success=N query_ms_p50=Q docs=D` followed by more key=value pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

from agentrl.chat import ChatRenderer
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.envs.search import (
    Bm25Index,
    SearchFactory,
    SearchReward,
    corpus_index,
    generate_world,
    generated_data,
    nosearch_player,
    search_tool_protocol,
    solver_player,
)
from agentrl.envs.search.language import match_question
from agentrl.envs.search.world import SEEN_POOL, UNSEEN_POOL
from agentrl.rollout import RolloutConfig


async def _success(player: Any, tasks: list[Any]) -> float:
    groups = await asyncio.gather(*(player(t) for t in tasks))
    return float(sum(g.trajectories[0].won for g in groups) / len(groups))


def baselines() -> tuple[float, float, int]:
    """(solver success, no-search success, episodes each) on the whole valid_unseen split."""
    data = generated_data(0)
    tasks = data.tasks("valid_unseen")
    protocol = search_tool_protocol()
    tokenizer: Any = build_qwen_tokenizer()
    kwargs: dict[str, Any] = {
        "env_factory": SearchFactory(data.by_task_id(), corpus_index(data.corpus)),
        "renderer": ChatRenderer(tokenizer, protocol.tools),
        "protocol": protocol,
        "rollout": RolloutConfig(group_size=1, max_env_steps=8, retry_backoff=0.0),
        "reward_fn": SearchReward(),
    }
    solver = asyncio.run(_success(solver_player(**kwargs), tasks))
    nosearch = asyncio.run(_success(nosearch_player(**kwargs), tasks))
    return solver, nosearch, len(tasks)


def _queries(questions: list[str], count: int) -> list[str]:
    rng = random.Random(0)
    picked = [rng.choice(questions) for _ in range(count)]
    names = [parsed[1] for q in picked if (parsed := match_question(q)) is not None]
    return [q if i % 2 else names[i % len(names)] for i, q in enumerate(picked)]


def latency(index: Bm25Index, queries: list[str]) -> tuple[float, float]:
    """(p50, p95) milliseconds of one top-3 search, after a few warm-up queries."""
    for query in queries[:5]:
        index.search(query, 3)
    times = []
    for query in queries:
        start = time.perf_counter()
        index.search(query, 3)
        times.append((time.perf_counter() - start) * 1000)
    cuts = statistics.quantiles(times, n=20)
    return statistics.median(times), cuts[18]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=400, help="timed queries per corpus")
    parser.add_argument("--big-docs", type=int, default=100_000, help="documents of the big corpus")
    args = parser.parse_args()

    solver, nosearch, episodes = baselines()
    print(f"valid_unseen ({episodes} questions): solver {solver:.1%}, no-search {nosearch:.1%}")

    data = generated_data(0)
    start = time.perf_counter()
    index = Bm25Index(data.corpus.documents)  # a fresh build, not the cached one
    small_index_s = time.perf_counter() - start
    questions = [q.question for qs in data.questions.values() for q in qs]
    p50, p95 = latency(index, _queries(questions, args.queries))
    docs = len(index)
    print(f"shipped corpus: {docs} docs, indexed in {small_index_s:.3f}s, "
          f"query p50 {p50:.3f} ms, p95 {p95:.3f} ms")  # fmt: skip

    factor = args.big_docs / (SEEN_POOL.documents + UNSEEN_POOL.documents)
    start = time.perf_counter()
    world = generate_world(0, SEEN_POOL.scaled(factor), UNSEEN_POOL.scaled(factor))
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    big = Bm25Index(world.documents)
    index_s = time.perf_counter() - start
    big_questions = [q.question for qs in world.questions.values() for q in qs]
    big_p50, big_p95 = latency(big, _queries(big_questions, args.queries))
    print(f"big corpus: {len(big)} docs generated in {generate_s:.1f}s, indexed in "
          f"{index_s:.1f}s, query p50 {big_p50:.2f} ms, p95 {big_p95:.2f} ms")  # fmt: skip

    print(
        f"solver_success={solver:.3f} nosearch_success={nosearch:.3f} query_ms_p50={p50:.3f} "
        f"docs={docs} query_ms_p95={p95:.3f} big_docs={len(big)} big_query_ms_p50={big_p50:.2f} "
        f"big_query_ms_p95={big_p95:.2f} index_s={small_index_s:.3f} big_index_s={index_s:.1f} "
        f"big_generate_s={generate_s:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
