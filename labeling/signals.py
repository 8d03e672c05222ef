"""What labeling announces, for apps built on it to act on (notifications listens).

Sent with `sender` the model class and the run's id; receivers must not raise,
since the run's own work matters more than the news of it.
"""

from django.dispatch import Signal

# A cluster run finished: run_id.
cluster_run_done = Signal()
