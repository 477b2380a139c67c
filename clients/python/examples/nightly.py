"""Fetch tonight's files through spoolfetch, then follow every ending from a stored cursor."""
import sys
from pathlib import Path

from spoolfetch import RequestFailed, Spool

spool = Spool(sys.argv[1])                      # e.g. /var/spool/spoolfetch
base = sys.argv[2]                              # e.g. https://example.org/exports
request = spool.add([f"{base}/users.csv", f"{base}/orders.csv"],
                    group="nightly", deadline="6h", priority="high")
try:
    result = request.wait(timeout=3600)         # WaitTimeout after an hour
except RequestFailed as failure:
    for item in failure.items:                  # from failed/nightly.error
        print(f"#{item.index} {item.url}: {item.code} ({item.message})", file=sys.stderr)
    sys.exit(1)
for item in result.items:
    print(item.file, item.marker["bytes"], item.marker["sha256"])

# Everything that ended since the last run, resumable: store each handled event's cursor.
cursor_file = Path(sys.argv[3])                 # e.g. /var/lib/myjob/cursor
since = cursor_file.read_text() if cursor_file.exists() else None
for event in spool.events(since=since):
    print(event.event, event.outcome, event.id, event.file or event.code or "")
    cursor_file.write_text(event.cursor)
