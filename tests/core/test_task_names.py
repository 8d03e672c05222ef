"""Celery task names are a stored contract: beat's schedule and PeriodicTask rows hold them as text.

Every task is declared with its name and queue, so a module move cannot
orphan a saved schedule; every name the project refers to by text resolves to
a registered task, and each task is sent to the queue it declares.
"""

import ast
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app
from exports import datasets
from feedback import tasks as feedback_tasks

ROOT = Path(__file__).resolve().parents[2]
TASK_MODULES = sorted(path for path in ROOT.glob("*/tasks.py") if ".venv" not in path.parts)
EMBED_TASKS = {"feedback.tasks.embed_items", "feedback.tasks.embed_waiting", "feedback.tasks.reembed_items"}


def declared_tasks() -> dict[str, dict[str, str]]:
    """function path -> the keyword arguments (as literals) of its @shared_task."""
    found = {}
    for path in TASK_MODULES:
        module = f"{path.parent.name}.tasks"
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if getattr(target, "id", None) != "shared_task":
                    continue
                keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
                found[f"{module}.{node.name}"] = {
                    k.arg: k.value.value for k in keywords if isinstance(k.value, ast.Constant)
                }
    return found


def test_every_task_declares_its_own_path_as_name_and_a_queue():
    declared = declared_tasks()
    assert len(declared) >= 15
    for path, options in declared.items():
        assert options.get("name") == path, path
        assert options.get("queue") in {"default", "embed"}, path


def test_every_name_the_project_refers_to_is_a_registered_task():
    app.loader.import_default_modules()
    referred = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    referred |= {feedback_tasks.ASSIGN_TASK, feedback_tasks.CHECK_TASK, datasets.SCHEDULED_TASK}
    missing = sorted(name for name in referred if name not in app.tasks)
    assert missing == []
    assert set(declared_tasks()) <= set(app.tasks)


@pytest.mark.parametrize("name", sorted(declared_tasks()))
def test_a_task_sent_by_name_goes_to_its_declared_queue(name, monkeypatch):
    """What beat, or anything holding the name as text, sends: the queue comes from the declaration alone."""
    app.loader.import_default_modules()
    sent = []
    monkeypatch.setattr(app.amqp, "send_task_message", lambda producer, task_name, message, **options: sent.append(
        (task_name, options["queue"].name)
    ))
    app.send_task(name, args=[])
    expected = "embed" if name in EMBED_TASKS else "default"
    assert sent == [(name, expected)]


@pytest.mark.parametrize("name", sorted(declared_tasks()))
def test_a_producer_that_knows_only_the_name_routes_it_to_the_same_queue(name):
    """Without the task's declaration at hand (task_type=None): what the routes alone decide."""
    declared = declared_tasks()[name]["queue"]
    options = app.amqp.router.route({}, name, task_type=None)
    assert options["queue"].name == declared
