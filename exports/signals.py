"""What exports announce, for apps built on them to act on (notifications listens).

Receivers must not raise: the version (or the run's failure) is recorded
either way, and matters more than the news of it.
"""

from django.dispatch import Signal

# A run made a version: version, run.
export_version_made = Signal()
# A run failed: run_id.
export_failed = Signal()
