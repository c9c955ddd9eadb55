"""The simulator keeps every operation's JSON once rendered: at the size of the JSON (issue 24:
`opsaudit demo` simulates its account in its own process)."""

from __future__ import annotations

import tracemalloc
from typing import Any


def test_rendered_operations_cost_their_length_not_a_render_buffer(make_sim: Any) -> None:
    """orjson's result keeps the ~4 KiB buffer it wrote into: the demo's 100k operations held
    ~390 MiB instead of ~36."""
    sim = make_sim(seed=5, projects=1, shared_projects=0, ops_per_project_per_day=2000)
    [pid] = sim.project_ids()
    world = sim.world
    project = world.by_id[pid]
    assert all(r is None for r in project.rendered)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        page, _ = project.page(None, None, world.actions, world.statuses)  # every operation
        del page
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    rendered = project.rendered
    assert len(rendered) > 1000 and all(r is not None for r in rendered)
    json_bytes = sum(len(r) for r in rendered)
    # Each kept object: its bytes plus a header of ~33 bytes; nothing near 4 KiB per operation.
    assert kept < 1.25 * json_bytes, (kept, json_bytes)
