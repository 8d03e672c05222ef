"""feedback.embedder: plain tests, no database.

The first test to embed exports the int8 model into MODEL_CACHE_DIR (about
15 s once); later runs reuse the file.
"""

import multiprocessing
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from feedback import embedder


@pytest.fixture
def onnx_backend(monkeypatch):
    monkeypatch.setenv("EMBEDDING_BACKEND", "onnx-int8")


@pytest.fixture
def torch_backend(monkeypatch):
    monkeypatch.setenv("EMBEDDING_BACKEND", "torch")


def test_it_returns_normalised_float32_vectors_of_384_dimensions(onnx_backend):
    vectors = embedder.embed_texts(["the agent edited the wrong file", "thumbs down", "ok"])

    assert vectors.shape == (3, embedder.DIMENSIONS) == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_identical_texts_get_identical_vectors(onnx_backend):
    texts = ["it ran the tests but claimed success", "asks for clarification too often"]

    vectors = embedder.embed_texts([texts[0], texts[1], texts[0]])

    assert np.array_equal(vectors[0], vectors[2])
    assert np.array_equal(vectors, embedder.embed_texts([texts[0], texts[1], texts[0]]))


def test_close_sentences_are_more_similar_than_unrelated_ones(onnx_backend):
    card, card_again, weather = embedder.embed_texts(
        [
            "My new card has not arrived yet.",
            "I am still waiting for my card to be delivered.",
            "It is sunny in Paris today.",
        ]
    )

    assert card @ card_again > card @ weather + 0.3
    assert card @ card_again > card_again @ weather + 0.3


def test_the_order_of_the_texts_is_kept_whatever_the_batching(onnx_backend):
    texts = [f"{'very ' * (i % 7)}long complaint number {i}" for i in range(40)]

    in_one_batch = embedder.embed_texts(texts)
    in_small_batches = embedder.embed_texts(texts, batch_size=3)

    # int8 activations are quantised per batch, so companions move a vector a little.
    assert np.all((in_one_batch * in_small_batches).sum(axis=1) > 0.97)


def test_the_onnx_vectors_are_close_to_the_torch_vectors(monkeypatch):
    texts = [
        "How do I locate my card?",
        "The agent edited the wrong file and then said it was done.",
        "Why was I charged a fee for my transfer?",
        "It special-cased the tests so that they pass.",
        "",
        "word " * 400,  # past the 256-token truncation
    ]
    monkeypatch.setenv("EMBEDDING_BACKEND", "torch")
    torch_vectors = embedder.embed_texts(texts)
    monkeypatch.setenv("EMBEDDING_BACKEND", "onnx-int8")
    onnx_vectors = embedder.embed_texts(texts)

    assert np.all((onnx_vectors * torch_vectors).sum(axis=1) > 0.9)


def test_an_empty_list_gives_an_empty_matrix(onnx_backend):
    vectors = embedder.embed_texts([])

    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_an_empty_string_does_not_crash(onnx_backend):
    vectors = embedder.embed_texts(["", "   ", "not empty"])

    assert vectors.shape == (3, 384)
    assert np.all(np.isfinite(vectors))


def test_the_model_label_names_the_backend(monkeypatch):
    monkeypatch.delenv("EMBEDDING_BACKEND", raising=False)
    assert embedder.model_label() == "all-MiniLM-L6-v2/onnx-int8"

    monkeypatch.setenv("EMBEDDING_BACKEND", "torch")
    assert embedder.backend_name() == "torch"
    assert embedder.model_label() == "all-MiniLM-L6-v2/torch"


def test_it_refuses_an_unknown_backend(monkeypatch):
    monkeypatch.setenv("EMBEDDING_BACKEND", "onnx-fp16")

    with pytest.raises(ValueError, match="EMBEDDING_BACKEND"):
        embedder.embed_texts(["hello"])


def test_threads_starting_at_once_load_the_model_once(monkeypatch):
    loads = []

    def slow_load():
        loads.append(1)
        time.sleep(0.2)
        return lambda texts, batch_size: np.ones((len(texts), 384), dtype=np.float32)

    monkeypatch.setattr(embedder, "_encoders", {})
    monkeypatch.setattr(embedder, "_load_onnx_int8", slow_load)
    monkeypatch.setenv("EMBEDDING_BACKEND", "onnx-int8")
    threads = [threading.Thread(target=embedder.embed_texts, args=(["hi"],)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(loads) == 1


def _embed_in_child(results):
    results.put(embedder.embed_texts(["the agent edited the wrong file"]))


def test_a_forked_worker_embeds_with_a_model_of_its_own(onnx_backend):
    in_parent = embedder.embed_texts(["the agent edited the wrong file"])
    context = multiprocessing.get_context("fork")  # like Celery's prefork pool
    results = context.Queue()
    child = context.Process(target=_embed_in_child, args=(results,))
    child.start()
    in_child = results.get(timeout=60)
    child.join(timeout=10)

    assert child.exitcode == 0
    assert np.array_equal(in_child, in_parent)


def _export_in_child(results):
    results.put(str(embedder._onnx_int8_path()))


def test_processes_starting_at_once_export_the_model_once(monkeypatch, tmp_path):
    exports = tmp_path / "exports.log"

    def slow_fake_export(target):
        with exports.open("a") as log:
            log.write("export\n")
        time.sleep(0.5)
        partial = target.with_suffix(".partial")
        partial.write_bytes(b"onnx")
        partial.replace(target)

    monkeypatch.setenv("MODEL_CACHE_DIR", str(tmp_path / "models"))
    monkeypatch.setattr(embedder, "_export_int8", slow_fake_export)
    context = multiprocessing.get_context("fork")  # the children inherit the fake
    results = context.Queue()
    children = [context.Process(target=_export_in_child, args=(results,)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=30)

    paths = {results.get(timeout=5) for _ in children}
    assert len(paths) == 1
    assert exports.read_text() == "export\n"
    assert Path(paths.pop()).read_bytes() == b"onnx"
