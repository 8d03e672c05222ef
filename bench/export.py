"""Dataset exports at scale: wall time and peak memory at 10,000 and 100,000 items, every format.

Fills a throwaway database (SQLite in a temporary folder, or the PostgreSQL
named by --database-url: give it a scratch database, it is migrated and
filled) with N thumbs-up/down ratings whose conversations, outputs and tool
calls come from the demo corpus generator (about 1.2 KB of context each), a
category each, a reviewer label with hint, corrected response and tags on one
item in five, and a vector each with the text it stands for (the pipeline
stores both together; `--no-stored-text` leaves the text out, so that every
export derives it again). A 1,000-item eval version is exported first
and 300 train items are planted within cosine 0.95 of eval items, so the
held-out check does real work.

Each export then runs in a fresh process (so its peak memory is its own):
a train dataset in all nine formats over the first 10,000 items, and over all
of them. It prints wall time, the export's CPU time (steadier than wall time
when other jobs share the machine, whose load average is printed too), peak
RSS, the RSS the export added on top of the loaded process, bytes written and
items per second. The full export then
runs once more over unchanged data: it makes no version, and its wall time
beside the first run's (and beside the time a second read of the files for
their checksums would take) shows the unchanged check costs no second pass.

    python bench/export.py                  # 10,000 and 100,000 items on SQLite
    python bench/export.py --n 20000        # smaller
    python bench/export.py --database-url postgres://postgres@127.0.0.1:5432/bench_export
    python bench/export.py --keep /tmp/bench-export   # seed once into that folder, reuse it next time
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ALL_FORMATS = [
    "chat_jsonl", "preference_jsonl", "kto_jsonl", "coaching_jsonl", "hints_jsonl", "eval_jsonl", "inspect_jsonl",
    "csv", "parquet",
]
SMALL = 10_000
EVAL_ITEMS = 1_000
PLANTED = 300


def rss_mb(field: str = "VmRSS") -> float:
    """Resident memory now (VmRSS) or at its peak (VmHWM) in MB.

    VmHWM rather than getrusage's ru_maxrss: Linux carries ru_maxrss across
    exec, so a child would report its parent's peak (the seeding process).
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def django_setup(env: dict) -> None:
    os.environ.update(env)
    import django

    django.setup()


def seed(n: int, *, stored_text: bool = True) -> None:
    """Items, categories, labels, vectors and one eval version."""
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from demo import corpus as demo_corpus
    from exports import datasets, runs
    from exports.models import Trigger
    from exports.schemas import DatasetIn
    from feedback.models import Embedding, FeedbackItem, Source
    from feedback.pipeline import embed_text_for
    from labeling.models import Assignment, Category, Label

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    sources = {
        slug: Source.objects.create(name=slug, slug=slug, signing_secret="whsec_YmVuY2g=")
        for slug in ("bench-small", "bench-large", "bench-eval")
    }
    categories = Category.objects.bulk_create(
        Category(name=f"Failure theme {c}", status="confirmed") for c in range(40)
    )
    categories = list(Category.objects.order_by("id"))
    reviewer = get_user_model().objects.create_user("bench-reviewer")
    centres = rng.standard_normal((40, 384)).astype(np.float32)
    anchor = datetime(2026, 11, 30, tzinfo=UTC)
    signals = [s for s in demo_corpus.generate(count=int(n * 1.15) + 100, seed=3, anchor=anchor) if s.kind == "rating"][
        :n
    ]
    eval_vectors = []

    def unit(rows):
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def insert(chunk_signals, *, offset, source, kind="rating", vectors=None):
        count = len(chunk_signals)
        theme = rng.integers(0, 40, count)
        if vectors is None:
            vectors = unit(centres[theme] + 0.6 * rng.standard_normal((count, 384)).astype(np.float32))
        embeddings = Embedding.objects.bulk_create(
            Embedding(content_hash=uuid.uuid4().hex * 2, model_name="bench", vector=v.astype(np.float32).tobytes())
            for v in vectors
        )
        items = FeedbackItem.objects.bulk_create(
            FeedbackItem(
                source=source,
                external_id=f"{kind}-{offset + i}",
                kind=kind,
                rating=(1 if s.payload.get("rating") == "up" else -1) if kind == "rating" else None,
                title=s.payload.get("title", ""),
                comment=s.payload.get("comment") or s.payload.get("what_happened", ""),
                expected=s.payload.get("expected", ""),
                context=s.payload.get("context") or {"transcript": s.payload.get("transcript", "")},
                model_name="coder",
                model_version=(s.payload.get("model") or {}).get("version", s.payload.get("model_version", "")),
                variant=s.payload.get("variant", ""),
                surface=s.payload.get("surface", ""),
                occurred_at=datetime.fromisoformat(s.payload["occurred_at"])
                if s.payload.get("occurred_at")
                else anchor,
                receipt_id=uuid.uuid4(),
                embedding=e,
                status="assigned",
            )
            for i, (s, e) in enumerate(zip(chunk_signals, embeddings))
        )
        if stored_text:
            # What the pipeline stores with each vector: the text it embedded.
            for item in items:
                item.embed_text = embed_text_for(item, extra_patterns=())
            FeedbackItem.objects.bulk_update(items, ["embed_text"], batch_size=1000)
        Assignment.objects.bulk_create(
            Assignment(item=item, category=categories[t], confidence=0.8) for item, t in zip(items, theme.tolist())
        )
        labels = [
            Label(
                item=item,
                reviewer=reviewer,
                category=categories[t],
                verdict="failure",
                severity="medium",
                tags=["wrong file"] if t % 2 else ["claimed success falsely"],
                hint=f"Check the request again ({t}).",
                corrected_response=f"A corrected answer for theme {t}, which does what the user asked.",
                split="train",
            )
            for item, t in zip(items, theme.tolist())
            if item.id % 5 == 0
        ]
        Label.objects.bulk_create(labels)
        return vectors

    reports = [s for s in demo_corpus.generate(count=EVAL_ITEMS * 12, seed=5, anchor=anchor) if s.kind == "report"][
        :EVAL_ITEMS
    ]
    eval_vectors = insert(reports, offset=0, source=sources["bench-eval"], kind="report")
    for start in range(0, n, 5000):
        chunk = signals[start : start + 5000]
        source = sources["bench-small"] if start < SMALL else sources["bench-large"]
        vectors = None
        if start == 0:
            base = unit(
                centres[rng.integers(0, 40, len(chunk))]
                + 0.6 * rng.standard_normal((len(chunk), 384)).astype(np.float32)
            )
            # Near-duplicates of eval items: cosine about 0.95 to one of them.
            for row in range(PLANTED):
                target = eval_vectors[row]
                noise = unit(rng.standard_normal((1, 384)).astype(np.float32))[0]
                noise -= (noise @ target) * target
                noise /= np.linalg.norm(noise)
                base[row] = 0.95 * target + np.sqrt(1 - 0.95**2) * noise
            vectors = base
        insert(chunk, offset=start, source=source, vectors=vectors)
    print(f"seeded {n:,} ratings and {EVAL_ITEMS:,} eval reports in {time.perf_counter() - started:.1f}s")

    evals = datasets.dataset_create(
        spec=DatasetIn.model_validate(
            {"name": "bench-eval", "purpose": "eval", "formats": ["eval_jsonl"], "filters": {"sources": ["bench-eval"]}}
        )
    )
    run = runs.export_run_start(dataset=evals, trigger=Trigger.COMMAND, enqueue=False)
    version = runs.export_run_execute(run_id=run.id)
    print(f"eval version: {version.item_count} items")
    for name, filters in (("bench-10k", {"sources": ["bench-small"]}), ("bench-all", {"kinds": ["rating"]})):
        datasets.dataset_create(
            spec=DatasetIn.model_validate(
                {"name": name, "purpose": "train", "formats": ALL_FORMATS, "filters": filters}
            )
        )


def child(dataset_name: str) -> None:
    """Export one dataset in this fresh process and print one JSON line."""
    import pyarrow.parquet  # noqa: F401

    from exports import runs, writing
    from exports.models import Dataset, Trigger

    dataset = Dataset.objects.get(name=dataset_name)
    baseline = rss_mb()
    load = os.getloadavg()[0]
    started = time.perf_counter()
    cpu_started = time.process_time()
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    version = runs.export_run_execute(run_id=run.id)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak = rss_mb("VmHWM")
    run.refresh_from_db()
    print(
        json.dumps(
            {
                "status": run.status,
                "folder": str(writing.version_folder(version=version)),
                "items": version.item_count,
                "held_out": version.held_out.get("total", 0),
                "seconds": seconds,
                "cpu": cpu,
                "load": max(load, os.getloadavg()[0]),
                "peak_mb": peak,
                "baseline_mb": baseline,
                "bytes": sum(entry["bytes"] for entry in version.files),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--keep", default="", help="seed into this folder once and reuse it (SQLite only)")
    parser.add_argument("--no-stored-text", action="store_true", help="seed items without their embedded text")
    args = parser.parse_args()

    if args.child:
        django_setup({})
        child(args.child)
        return

    workdir = args.keep or tempfile.mkdtemp(prefix="bench-export-")
    reuse = bool(args.keep) and not args.database_url and (Path(workdir) / "bench.sqlite3").exists()
    Path(workdir).mkdir(parents=True, exist_ok=True)
    env = {
        "DATA_DIR": workdir,
        "EXPORT_ROOT": f"{workdir}/exports",
        "SECRET_KEY": "bench",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": args.database_url or f"sqlite:///{workdir}/bench.sqlite3",
        "LOG_LEVEL": "WARNING",
    }
    django_setup(env)
    from django.db import connection

    if reuse:
        from django.core.management import call_command

        from exports.models import DatasetVersion

        call_command("migrate", verbosity=0)
        # Start again from the eval version alone: the train versions of an earlier run go.
        for version in DatasetVersion.objects.filter(dataset__name__in=("bench-10k", "bench-all")):
            version.delete()
        import shutil

        for name in ("bench-10k", "bench-all"):
            shutil.rmtree(Path(env["EXPORT_ROOT"]) / name, ignore_errors=True)
        print(f"reusing the items seeded in {workdir}")
    else:
        seed(args.n, stored_text=not args.no_stored_text)

    print(f"database: {connection.vendor}; exports under {env['EXPORT_ROOT']}")
    header = ("export", "items", "held out", "wall", "cpu", "items/s", "peak RSS", "added", "written", "load")
    print("{:<10} {:>8} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8} {:>9} {:>5}".format(*header))
    runs = {}
    for name, label in (("bench-10k", "bench-10k"), ("bench-all", "bench-all"), ("bench-all", "unchanged")):
        result = subprocess.run(
            [sys.executable, __file__, "--child", name],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode:
            print(result.stdout, result.stderr, file=sys.stderr)
            raise SystemExit(f"the export of {name} failed")
        f = runs[label] = json.loads(result.stdout.strip().splitlines()[-1])
        added = f["peak_mb"] - f["baseline_mb"]
        print(
            f"{label:<10} {f['items']:>8,} {f['held_out']:>9,} {f['seconds']:>7.1f}s {f['cpu']:>7.1f}s "
            f"{f['items'] / f['seconds']:>9,.0f} {f['peak_mb']:>7.0f}MB {added:>6.0f}MB {f['bytes'] / 1e6:>7.0f}MB "
            f"{f['load']:>5.1f}  {f['status']}"
        )
    first, again = runs["bench-all"], runs["unchanged"]
    started = time.perf_counter()
    for path in sorted(Path(first["folder"]).iterdir()):
        hashlib.sha256(path.read_bytes())
    reread = time.perf_counter() - started
    print(
        f"unchanged run {again['seconds']:.1f}s vs first run {first['seconds']:.1f}s "
        f"(ratio {again['seconds'] / first['seconds']:.2f}); a second read of the files for checksums "
        f"would add {reread:.2f}s ({reread / first['seconds']:.1%} of the first run)"
    )


if __name__ == "__main__":
    main()
