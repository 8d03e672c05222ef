"""Writing a version's folder: the data files, README.md and manifest.json, each synced to disk,
then read back as its consumer would; and checking a stored version by writing it again."""

import functools
import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db.models import BooleanField, Value

from core.collector import fewer_collections
from exports.card import card_text, manifest_build, manifest_bytes
from exports.files import Writer
from exports.formats import WRITERS
from exports.models import Dataset, DatasetVersion
from exports.records import ExportRecord
from exports.selectors import records_stream, version_members
from exports.written import WrittenStrings
from feedback import custom_patterns
from feedback.scrubber import ScrubMemo


class UnscrubbedOutput(Exception):
    """The files of a version still hold text the scrubber would replace."""


class UnreadableOutput(Exception):
    """A file of a version does not read back as its consumer would read it."""


def export_root() -> Path:
    return Path(settings.EXPORT_ROOT)


def dataset_folder(*, name: str) -> Path:
    return export_root() / name


def version_folder(*, version: DatasetVersion) -> Path:
    return dataset_folder(name=version.dataset.name) / f"v{version.number}"


@functools.cache
def app_version() -> str:
    """APP_VERSION when set, else the checked-out commit (read from .git, no git process), else 'unknown'."""
    configured = settings.APP_VERSION
    if configured:
        return str(configured)
    git = Path(settings.BASE_DIR) / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        pass
    return "unknown"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Written:
    files: list[dict]
    manifest: dict
    manifest_sha256: str
    counts: dict


class Counts:
    def __init__(self, *, disputed_left_out: int | None = None) -> None:
        self.items = 0
        # Items the filters may take that wait for a settlement of their reviewers'
        # disagreement; None (versions made before disputes were counted) leaves the key out.
        self.disputed_left_out = disputed_left_out
        self.by_category = Counter()
        self.by_area = Counter()
        self.by_model_version = Counter()
        self.by_split = Counter()
        self.scrubbed = Counter()

    def add(self, records: list[ExportRecord]) -> None:
        for record in records:
            self.items += 1
            self.scrubbed.update(record.scrubbed)
            self.by_category[record.category or "(none)"] += 1
            self.by_area[record.area or "(none)"] += 1
            self.by_model_version[record.model_version or "(none)"] += 1
            self.by_split[record.split or "unlabelled"] += 1

    def as_dict(self) -> dict:
        return {
            "items": self.items,
            "by_category": dict(sorted(self.by_category.items())),
            "by_area": dict(sorted(self.by_area.items())),
            "by_model_version": dict(sorted(self.by_model_version.items())),
            "by_split": dict(sorted(self.by_split.items())),
        } | ({} if self.disputed_left_out is None else {"disputed_left_out": self.disputed_left_out})


def _check_loadable(writers: list[Writer]) -> None:
    """Read each closed file back as its consumer would, on a sample (each writer knows how); UnreadableOutput
    if one fails. The texts of every row were checked while they were written (exports.written), so nothing
    here reads a whole file again."""
    for writer in writers:
        problem = writer.readback_problem()
        if problem:
            raise UnreadableOutput(f"{writer.file_name} does not read back: {problem}")


def _merge_found(found: dict[str, set[str]], more: dict[str, set[str]]) -> None:
    for name, files in more.items():
        found.setdefault(name, set()).update(files)


def write_folder(
    *,
    folder: Path,
    meta: dict,
    batches: Iterator[list[ExportRecord]],
    held_out: Callable[[], dict],
    extra_patterns: Sequence[tuple[str, str]],
    counts: Counts | None = None,
    memo: ScrubMemo | None = None,
) -> Written:
    """Every file of a version into `folder`: data files, README.md, then manifest.json.

    `extra_patterns` are the custom scrub patterns the records were scrubbed
    with; the self-check looks for them too. It checks every string of every
    row as the row is written (exports.written), each distinct text once per
    export (`memo`, the records' scrub memo when given: a text they were
    scrubbed to unchanged is known clean), and fails the version with
    UnscrubbedOutput naming each pattern and the files holding it. Then each
    file is read back on a sample (_check_loadable).
    """
    writers: list[Writer] = [WRITERS[name](folder) for name in meta["formats"]]
    counts = Counts() if counts is None else counts
    memo = memo if memo is not None else ScrubMemo(extra_patterns)
    sink = WrittenStrings(memo)
    for writer in writers:
        writer.sink = sink
    found = sink.found
    # An export allocates millions of short-lived rows, turns and strings and keeps almost none.
    with fewer_collections():
        try:
            for records in batches:
                counts.add(records)
                for writer in writers:
                    writer.write(records)
                _merge_found(found, sink.check(memo))
        finally:
            for writer in writers:
                writer.close()
        _merge_found(found, sink.check(memo))  # rows written at close: pairs across items
    if found:
        details = "; ".join(f"{name} in {', '.join(sorted(files))}" for name, files in sorted(found.items()))
        raise UnscrubbedOutput(f"the export files still hold unscrubbed text: {details}")
    _check_loadable(writers)
    files = [
        {
            "name": writer.file_name,
            "format": writer.format_name,
            "rows": writer.rows,
            "bytes": writer.path.stat().st_size,
            "sha256": writer.sha256,
        }
        for writer in writers
    ]
    summary = counts.as_dict()
    summary["rows_by_format"] = {entry["format"]: entry["rows"] for entry in files}
    # Each writer says why it wrote nothing: the manifest and the card name the reason.
    empty_formats = {writer.format_name: writer.empty_reason for writer in writers if not writer.rows}
    held = held_out()
    readme = folder / "README.md"
    readme.write_text(
        card_text(meta=meta, counts=summary, held_out=held, files=files, empty_formats=empty_formats),
        encoding="utf-8",
        newline="\n",
    )
    files.append(
        {"name": "README.md", "format": "card", "rows": None, "bytes": readme.stat().st_size, "sha256": sha256_of(readme)}
    )
    files.sort(key=lambda entry: entry["name"])
    scrubbed = dict(sorted(counts.scrubbed.items()))
    manifest = manifest_build(
        meta=meta, counts=summary, held_out=held, files=files, scrubbed=scrubbed, empty_formats=empty_formats
    )
    content = manifest_bytes(manifest)
    (folder / "manifest.json").write_bytes(content)
    for path in folder.iterdir():
        fsync(path)
    fsync(folder)
    return Written(files=files, manifest=manifest, manifest_sha256=hashlib.sha256(content).hexdigest(), counts=summary)


def version_meta(
    *,
    dataset: Dataset,
    number: int,
    purpose: str,
    mode: str,
    base_number: int | None,
    filters: dict,
    formats: list[str],
    created_at: datetime,
    made_by: str,
    trigger: str,
    app_version: str,
) -> dict:
    return {
        "dataset": dataset.name,
        "description": dataset.description,
        "number": number,
        "purpose": purpose,
        "mode": mode,
        "base_number": base_number,
        "filters": filters,
        "formats": formats,
        "created_at": created_at,
        "made_by": made_by,
        "trigger": trigger,
        "app_version": app_version,
    }


def dataset_version_write(*, version: DatasetVersion, folder: Path) -> Written:
    """Write a version's files again from its recorded members and facts.

    Nothing is filtered or held out anew (membership is final), and every
    timestamp and name comes from the version row, so with unchanged items
    the bytes equal the original ones.
    """
    meta = version_meta(
        dataset=version.dataset,
        number=version.number,
        purpose=version.purpose,
        mode=version.mode,
        base_number=version.base_number,
        filters=version.filters,
        formats=version.formats,
        created_at=version.created_at,
        made_by=version.made_by,
        trigger=version.trigger,
        app_version=version.app_version,
    )
    meta["description"] = version.manifest.get("description", version.dataset.description)
    items = version_members(version=version).annotate(
        in_opposite_purpose=Value(False, output_field=BooleanField())
    )
    # Today's scrub patterns: a pattern added since the version was written
    # makes the rewrite differ, which is the cue to export again.
    extra_patterns = custom_patterns.all_sources(fresh=True)
    memo = ScrubMemo(extra_patterns)
    return write_folder(
        folder=folder,
        meta=meta,
        batches=records_stream(items, with_vector=False, extra_patterns=extra_patterns, memo=memo),
        held_out=lambda: version.held_out,
        extra_patterns=extra_patterns,
        memo=memo,
        # As recorded: the rewrite of a version must reproduce its manifest byte for byte.
        counts=Counts(disputed_left_out=version.counts.get("disputed_left_out")),
    )


@dataclass
class VersionCheck:
    identical: bool
    differing: list[str]
    restored: bool = False


def dataset_version_verify(*, version: DatasetVersion) -> VersionCheck:
    """Rewrite a version beside its folder and compare every checksum with the recorded ones.

    A version whose folder has gone missing is restored from the rewrite when it matches.
    """
    target = version_folder(version=version)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".v{version.number}.verify-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        written = dataset_version_write(version=version, folder=scratch)
        recorded = {entry["name"]: entry["sha256"] for entry in version.files}
        recorded["manifest.json"] = version.manifest_sha256
        rewritten = {entry["name"]: entry["sha256"] for entry in written.files}
        rewritten["manifest.json"] = written.manifest_sha256
        differing = sorted(
            name for name in recorded.keys() | rewritten.keys() if recorded.get(name) != rewritten.get(name)
        )
        if not differing and not target.exists():
            os.rename(scratch, target)
            return VersionCheck(identical=True, differing=[], restored=True)
        return VersionCheck(identical=not differing, differing=differing)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
