"""`opsaudit simulate`: the platform API simulator as a standalone server on loopback."""

from __future__ import annotations

import threading

import click

from exporter.cli._group import short_help
from exporter.cli._ops import FiniteFloatRange
from exporter.core.errors import ConfigError


@click.command("simulate", short_help=short_help("simulate"))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="0 picks a free port.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same data.")
@click.option(
    "--projects",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="Projects in the organizations; 2 projects shared with the user come on top.",
)
@click.option(
    "--days",
    type=click.FloatRange(0, 180, min_open=True),
    default=7.0,
    show_default=True,
    help="Days of history per project.",
)
@click.option(
    "--ops-per-day",
    type=click.IntRange(0, 1_000_000),
    default=500,
    show_default=True,
    help="Per project.",
)
@click.option(
    "--orgs",
    type=click.IntRange(0, 100),
    default=2,
    show_default=True,
    help="Organizations the user is in (0: none, every project shared with the user).",
)
@click.option(
    "--rate-limits/--no-rate-limits",
    default=True,
    show_default=True,
    help="700 requests/min per account, 40/s per route, as the real API.",
)
@click.option("--retry-after/--no-retry-after", default=True, show_default=True)
@click.option(
    "--time-scale",
    # At most 11.6 simulated days a second: --live's clock (microseconds, then datetimes) stays
    # below year 9999 for days; 1e308 overflowed on its first tick and killed the clock.
    type=FiniteFloatRange(min=0, min_open=True, max=1_000_000),
    default=1.0,
    show_default=True,
    help="Divides the rate windows; with --live, simulated seconds per real second.",
)
@click.option("--live", is_flag=True, help="Advance the clock: new operations, progress.")
def simulate(
    port: int,
    seed: int,
    projects: int,
    days: float,
    ops_per_day: int,
    orgs: int,
    rate_limits: bool,
    retry_after: bool,
    time_scale: float,
    live: bool,
) -> None:
    """Serve a simulated management API on 127.0.0.1 until Ctrl-C."""
    from exporter.simulator import RateLimits, SimConfig, Simulator

    config = SimConfig(
        seed=seed,
        projects=projects,
        days=days,
        ops_per_project_per_day=ops_per_day,
        orgs=orgs,
        port=port,
    )
    sim = Simulator(config)
    sim.rate_limits = RateLimits(
        enabled=rate_limits, retry_after=retry_after, time_scale=time_scale
    )
    try:
        sim.start()
    except OSError as exc:
        # A busy port is a usage error, one line, never a traceback (issue 23).
        raise ConfigError(
            f"cannot serve on 127.0.0.1:{port}: {exc.strerror}; pick another --port "
            "(0 picks a free one)"
        ) from None
    try:
        key = sim.personal_key
        click.echo(f"Simulated API at {sim.base_url}")
        click.echo(f"Personal API key: {key}")
        click.echo(f"Organizations: {', '.join(sim.org_ids)}")
        click.echo(f"Operations: {sim.operation_count()} in {len(sim.project_ids())} projects")
        click.echo("Try:")
        click.echo(
            f'  curl -H "Authorization: Bearer {key}" '
            f'"{sim.base_url}/projects?org_id={sim.org_ids[0] if sim.org_ids else ""}"'
        )
        click.echo(f"  NEON_API_KEY={key} OPSAUDIT_BASE_URL={sim.base_url} opsaudit sync")
        click.echo(f"Counters: {sim.root_url}/_sim/stats. Ctrl-C stops.")
        if live:
            sim.start_live(tick_seconds=1.0, sim_seconds_per_tick=time_scale)
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("Stopped.")
    finally:
        sim.stop()
