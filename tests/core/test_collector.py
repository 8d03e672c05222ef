"""core.collector: the garbage collector's settings for work that allocates many objects at once."""

import gc
import os
import subprocess
import sys

from django.conf import settings

from core import collector


def test_a_gunicorn_worker_sets_aside_what_it_loaded_and_collects_young_objects_less_often():
    # In a process of its own: freezing is for the life of the process.
    script = (
        "import gc, runpy, sys, django; django.setup(); "
        "conf = runpy.run_path('gunicorn.conf.py'); before = gc.get_threshold()[0]; "
        "conf['post_worker_init'](None); "
        "print(before, gc.get_threshold()[0], gc.get_freeze_count() > 0, 'feedback.api' in sys.modules)"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings", DEBUG="1")
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, frozen, views_loaded = done.stdout.split()[-4:]
    assert (before, after) == ("700", str(collector.YOUNG_THRESHOLD))
    assert frozen == "True" and views_loaded == "True"


def test_fewer_collections_restores_the_settings_it_found():
    before = gc.get_threshold()
    with collector.fewer_collections():
        assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
