"""The manifest and the README dataset card of a version: built only from recorded facts, so reruns match."""

import json
from typing import Any

from exports.encoding import iso
from exports.formats import WRITERS
from exports.holdout import REASONS

PURPOSE_TEXT = {
    "train": "training data",
    "eval": "a held-out evaluation set: its items never appear in a train export of this installation",
}


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode()


def manifest_build(
    *,
    meta: dict[str, Any],
    counts: dict,
    held_out: dict,
    files: list[dict],
    scrubbed: dict[str, int] | None = None,
    empty_formats: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`scrubbed`: placeholder label -> replacements over the whole version (texts are scrubbed as rows are built).

    `empty_formats`: format -> why its file has no row, so an empty file is never a silent surprise.
    """
    return {
        "dataset": meta["dataset"],
        "description": meta["description"],
        "purpose": meta["purpose"],
        "version": meta["number"],
        "mode": meta["mode"],
        "base_version": meta["base_number"],
        "created_at": iso(meta["created_at"]),
        "made_by": meta["made_by"],
        "trigger": meta["trigger"],
        "app_version": meta["app_version"],
        "filters": meta["filters"],
        "formats": meta["formats"],
        "counts": counts,
        "held_out": held_out,
        "files": files,
        "scrubbed": scrubbed or {},
        "empty_formats": dict(sorted((empty_formats or {}).items())),
    }


def _table(rows: list[tuple], header: tuple) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


# How each format's consumer reads it, beside the `datasets` line every format gets.
LOADING_NOTES = {
    "chat_jsonl": "SFT with TRL: `trl.SFTTrainer(train_dataset=<the dataset>)` (conversational `messages`).",
    "preference_jsonl": "DPO with TRL: `trl.DPOTrainer(train_dataset=<the dataset>)` (conversational "
    "`prompt` / `chosen` / `rejected`).",
    "kto_jsonl": "KTO with TRL: `trl.KTOTrainer(train_dataset=<the dataset>)` (`prompt` / `completion` / `label`).",
    "coaching_jsonl": "SFT with TRL on the rows with a completion (prompt-completion form: only the "
    "completion is trained); the rows without one are prompts to generate a corrected answer from.",
    "inspect_jsonl": "Inspect AI: `inspect_ai.dataset.json_dataset(\"{path}\")` gives the samples as they are.",
}


def card_text(
    *,
    meta: dict[str, Any],
    counts: dict,
    held_out: dict,
    files: list[dict],
    empty_formats: dict[str, str] | None = None,
) -> str:
    """README.md of a version: what it is, what is in it, what was held out and how to load it."""
    name, number = meta["dataset"], meta["number"]
    lines = [f"# {name} v{number}", ""]
    if meta["description"]:
        lines += [meta["description"], ""]
    lines += [
        f"- Purpose: {meta['purpose']} ({PURPOSE_TEXT[meta['purpose']]})",
        f"- Created: {iso(meta['created_at'])} by {meta['made_by']} ({meta['trigger']}), "
        f"app version {meta['app_version'] or 'unknown'}",
        f"- Mode: {meta['mode']}" + (f" (only items new since v{meta['base_number']})" if meta["base_number"] else ""),
        f"- Items: {counts['items']}",
        "",
        "## Files",
        "",
    ]
    rows = []
    by_file = {entry["name"]: entry for entry in files}
    for format_name in meta["formats"]:
        writer = WRITERS[format_name]
        entry = by_file[writer.file_name]
        rows.append((f"`{writer.file_name}`", format_name, entry["rows"], entry["bytes"], writer.description))
    lines += _table(rows, ("file", "format", "rows", "bytes", "contents"))
    if empty_formats:
        lines += ["", "Empty files:", ""]
        lines += [
            f"- `{WRITERS[format_name].file_name}`: {reason}" for format_name, reason in sorted(empty_formats.items())
        ]
    lines += ["", "Checksums (sha256) of every file are in `manifest.json`.", "", "## Filters", ""]
    if meta["filters"]:
        lines += [f"- {key}: {json.dumps(value, ensure_ascii=False)}" for key, value in meta["filters"].items()]
    else:
        lines += ["- none: every item"]
    lines += ["", "## Held out", ""]
    if held_out.get("total"):
        lines += [f"{held_out['total']} matching items were left out:", ""]
        lines += [
            f"- {count} {REASONS.get(reason, reason)} (`{reason}`)" for reason, count in held_out["reasons"].items()
        ]
    else:
        lines += ["No matching item was left out."]
    lines += [
        "",
        (
            f"Similarity threshold: cosine {held_out.get('similarity_threshold')} (all-MiniLM-L6-v2 vectors of the "
            "item text); texts are compared after casefolding, removing punctuation and collapsing whitespace."
        ),
        "",
    ]
    for title, key in (
        ("By category", "by_category"),
        ("By model version", "by_model_version"),
        ("By split", "by_split"),
    ):
        lines += [f"## {title}", ""]
        lines += _table(sorted(counts[key].items()), ("value", "items")) if counts[key] else ["(none)"]
        lines += [""]
    lines += ["## Loading", "", "```python", "from datasets import load_dataset", ""]
    for format_name in meta["formats"]:
        file_name = WRITERS[format_name].file_name
        loader = {"csv": "csv", "parquet": "parquet"}.get(format_name, "json")
        lines.append(f'load_dataset("{loader}", data_files="{name}/v{number}/{file_name}", split="train")')
    lines += ["```", ""]
    notes = [
        f"- `{WRITERS[format_name].file_name}`: " + LOADING_NOTES[format_name].format(
            path=f"{name}/v{number}/{WRITERS[format_name].file_name}"
        )
        for format_name in meta["formats"]
        if format_name in LOADING_NOTES
    ]
    if notes:
        lines += notes + [""]
    return "\n".join(lines)
