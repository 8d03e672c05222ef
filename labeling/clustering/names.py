"""Names and keywords of clusters, from how their own texts describe the failure: a phrase the
texts share, never a file name or an identifier; distinct from the siblings' names."""

from __future__ import annotations

import math
import re

import numpy as np


def describe_clusters(texts: list[str], labels: np.ndarray, *, top_n: int = 8) -> dict[int, list[str]]:
    """Keywords per cluster by class-based TF-IDF (c-TF-IDF, as in BERTopic).

    Each cluster's texts are joined into one document. A term scores by its
    frequency in the cluster (normalised by the cluster's word count) times
    log(1 + average words per cluster / the term's frequency over all
    clusters), so words common everywhere ("the model", "it") sink and words
    that mark one cluster rise. Unassigned items (-1) take no part.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    labels = np.asarray(labels)
    clusters = sorted(int(c) for c in set(labels.tolist()) if c >= 0)
    if not clusters:
        return {}
    documents = [" ".join(texts[i] for i in np.flatnonzero(labels == c)) for c in clusters]
    vectorizer = CountVectorizer(stop_words="english", ngram_range=(1, 2))
    try:
        counts = vectorizer.fit_transform(documents).toarray().astype(np.float64)
    except ValueError:  # only stop words or empty texts: nothing to say
        return {c: [] for c in clusters}
    terms = vectorizer.get_feature_names_out()
    words_per_cluster = counts.sum(axis=1, keepdims=True)
    tf = counts / np.maximum(words_per_cluster, 1)
    idf = np.log(1 + words_per_cluster.mean() / counts.sum(axis=0))
    scores = tf * idf
    out: dict[int, list[str]] = {}
    for row, cluster in enumerate(clusters):
        order = np.argsort(-scores[row], kind="stable")
        out[cluster] = [str(terms[i]) for i in order[:top_n] if scores[row, i] > 0]
    return out


def _capitalise(term: str) -> str:
    return re.sub(r"^\w", lambda match: match.group(0).upper(), term)


# "file" is both a word and what a path is masked with. Written by a person, a
# single file nearly always has a determiner or a modifier before it ("the
# wrong file", "which file", "a config file"); a masked path has none ("fixed
# it in file", "file with a test"). So "file" counts as masked unless one of
# these words precedes it.
_FILE_MODIFIERS = frozenset(
    """
    a an another any config correct different each entire every existing her his its lock log my new one only
    original other our relevant right same single source that the their this which whole wrong your
    """.split()
)
_MASKED_FILE = "\x00file"
# Words the text recipe puts where a file, identifier, hash, link or number was:
# they say nothing about the failure, so no name is made of them.
_MASK_WORDS = frozenset(
    {"name", "hash", "link", "n", "secret", "custom", "email", "phone", "ip", "path_home", _MASKED_FILE}
)
_WORD = re.compile(r"[a-z][a-z']*[a-z]|[a-z]")


def name_clusters(texts: list[str], labels: np.ndarray, *, max_words: int = 5) -> dict[int, str]:
    """A short phrase per cluster, taken from how its own texts say it ("claimed the tests pass").

    Every phrase of 1 to `max_words` words that some text of the cluster
    contains (not starting or ending with a stop word, no masked word) is
    scored by the share of the cluster's texts that contain it, times how
    much likelier it is there than in the other clusters' texts (a log
    ratio, so a phrase common everywhere scores nothing), with a bonus per
    word so that "edited the wrong file" beats "file" (3 a word: at 0.7
    broad clusters were named by one word, "Test", "Api"; the share of
    banking77's clusters whose name shares a word with their intent rose
    from 72% to 77%, CLINC150's from 61% to 65%). Clusters are named
    largest first and never take a phrase a sibling already has.
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    labels = np.asarray(labels)
    clusters = [int(c) for c in np.unique(labels) if c >= 0]
    if not clusters:
        return {}
    n = len(texts)
    phrases_of: dict[int, set[str]] = {}

    def phrases(i: int) -> set[str]:
        if i not in phrases_of:
            phrases_of[i] = _phrases(texts[i], max_words, ENGLISH_STOP_WORDS)
        return phrases_of[i]

    # Shares are estimated on evenly spaced samples, so 100,000 texts cost
    # about as much as _NAMING_SAMPLE: the phrase a cluster is known by is
    # common in it by definition.
    everyone = _evenly(np.arange(n), _NAMING_SAMPLE * 4)
    total: dict[str, int] = {}
    for i in everyone.tolist():
        for phrase in phrases(i):
            total[phrase] = total.get(phrase, 0) + 1
    sizes = {c: int((labels == c).sum()) for c in clusters}
    names: dict[int, str] = {}
    taken: set[str] = set()
    for cluster in sorted(clusters, key=lambda c: (-sizes[c], c)):
        members = _evenly(np.flatnonzero(labels == cluster), _NAMING_SAMPLE)
        inside: dict[str, int] = {}
        for i in members.tolist():
            for phrase in phrases(i):
                inside[phrase] = inside.get(phrase, 0) + 1
        size = len(members)
        # The cluster's expected share of the overall sample, to leave it out of "outside".
        own_in_total = sizes[cluster] * len(everyone) / n
        rest = max(len(everyone) - own_in_total, 1.0)

        def ranked(*, marking: bool) -> list[str]:
            scored = []
            for phrase, count in inside.items():
                share = count / size
                if marking and count < 2 and size > 2:
                    continue
                outside = max(total.get(phrase, 0) - share * own_in_total, 0.0) / rest
                lift = math.log((share + 0.01) / (outside + 0.01))
                if marking and lift <= 0:
                    continue
                words = phrase.count(" ") + 1
                scored.append((share * (lift if lift > 0 else 0.01) * (1 + 3.0 * (words - 1)), -words, phrase))
            scored.sort(key=lambda t: (-t[0], t[1], t[2]))
            return [phrase for _, _, phrase in scored if phrase not in taken]

        # A phrase several of its texts share that marks it out; failing that (a loose cluster whose texts
        # share nothing, or whose phrases larger siblings took) the best of the rest of what its texts
        # say, which still names what it holds where "Unnamed group" would not.
        name = next(iter(ranked(marking=True) or ranked(marking=False)), "")
        taken.add(name)
        names[cluster] = _capitalise(name) if name else f"Unnamed group {cluster + 1}"
    return names


_NAMING_SAMPLE = 500


def _evenly(indices: np.ndarray, at_most: int) -> np.ndarray:
    """At most `at_most` of the indices, evenly spaced (all of them when there are fewer)."""
    if len(indices) <= at_most:
        return indices
    return indices[np.linspace(0, len(indices) - 1, at_most).astype(np.int64)]


def _phrases(text: str, max_words: int, stop_words) -> set[str]:
    """The candidate phrases of one text: runs of words with no masked word, not edged by stop words."""
    out: set[str] = set()
    for line in re.split(r"[\n.;:!?()\[\]\"]+", text.lower()):
        words = _WORD.findall(line)
        words = [
            _MASKED_FILE if word == "file" and (i == 0 or words[i - 1] not in _FILE_MODIFIERS) else word
            for i, word in enumerate(words)
        ]
        for start in range(len(words)):
            if words[start] in stop_words or words[start] in _MASK_WORDS:
                continue
            for end in range(start + 1, min(start + max_words, len(words)) + 1):
                word = words[end - 1]
                if word in _MASK_WORDS:
                    break
                if word in stop_words or len(word) < 2:
                    continue
                out.add(" ".join(words[start:end]))
    return out
