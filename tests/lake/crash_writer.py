"""A writer process for the crash tests: commits batches 0..K-1 to a lake dataset, exactly once.

    python crash_writer.py DATA_DIR OPTIONS_JSON BATCHES ROWS WORKDIR [later]

Takes the lease (a killed holder of this machine is taken over at once), restores the state of the last
committed batch from the dataset (the local WORKDIR starts empty on every run: a "fresh
machine"), then commits the remaining batches. The state is an SQLite file whose only content
is the next batch to write, so a wrong restore shows up as a duplicate or a gap. With `later`,
each batch also carries version 2 of some operations of the one before (lakedata.LATER), so
each commit after the first records superseded versions.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from datetime import timedelta
from pathlib import Path

import lakedata  # beside this script

from exporter.store.lake import LakeDataset, parse_location


def main() -> None:
    data_dir, options, batches, rows, workdir = sys.argv[1:6]
    make = lakedata.versions_with_later if sys.argv[6:] == ["later"] else lakedata.versions
    location = parse_location(data_dir, json.loads(options))
    ds = LakeDataset.open(location, create=True)
    # Long enough that a loaded machine's stalled heartbeat does not lose it mid-run (0.6 s was
    # lost at a load of 10); a killed holder's lease is taken over by its pid, not its expiry.
    lease = ds.lease(ttl=timedelta(seconds=5))
    lease.grace = timedelta(seconds=0.5)
    lease.acquire(wait=True, timeout=30, poll=0.1)
    lease.start_heartbeat(1.0)
    state = Path(workdir) / "state.sqlite"
    state.parent.mkdir(parents=True, exist_ok=True)
    committed = ds.restore_state(state, lease=lease) or 0
    con = sqlite3.connect(state)
    con.execute("CREATE TABLE IF NOT EXISTS progress (next_batch INTEGER NOT NULL)")
    row = con.execute("SELECT next_batch FROM progress").fetchone()
    next_batch = row[0] if row else 0
    if next_batch != committed:
        raise SystemExit(f"restored state says batch {next_batch}, table says {committed}")
    for batch in range(next_batch, int(batches)):
        with con:
            con.execute("DELETE FROM progress")
            con.execute("INSERT INTO progress VALUES (?)", (batch + 1,))
        ds.commit(
            make(batch, int(rows)),
            state,
            batch + 1,
            run_id=f"run-{batch}",
            lease=lease,
        )
        print(f"committed {batch + 1}", flush=True)
    con.close()
    lease.release()


if __name__ == "__main__":
    main()
