"""Grouping texts by meaning: their unit-length embeddings, clustered by cosine similarity.

:func:`cluster` is a leader (single-pass centroid) clustering, a merge and one reassignment pass: each vector, in
the order given, joins the cluster whose centroid is the most similar if that similarity reaches ``threshold``,
else starts a cluster; clusters whose centroids reach ``threshold`` are merged (the order of the vectors may have
split them); then every vector is moved to its most similar final centroid and the centroids are recomputed.
It needs no number of clusters (which nobody knows for free text), is deterministic for a given order, and costs
O(n x clusters) dot products: the pools it serves hold thousands of short texts at most.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Cluster:
    #: Positions of the members in the input, in input order.
    members: list[int]
    #: The members' mean direction, unit length.
    centroid: np.ndarray


def unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def cluster(vectors: np.ndarray, threshold: float) -> list[Cluster]:
    """``vectors`` (n x d, unit rows) grouped so that each member's similarity to its centroid is at least
    ``threshold`` (see the module docstring); largest clusters first, ties in order of first member. A vector
    that ends below the threshold of its nearest final centroid belongs to no cluster."""
    if len(vectors) == 0:
        return []
    # One preallocated matrix of centroids (a row per cluster so far): each vector costs one matrix-vector product.
    centroid_rows = np.zeros((len(vectors), vectors.shape[1]))
    sums: list[np.ndarray] = []
    for vector in vectors:
        count = len(sums)
        if count:
            similarities = centroid_rows[:count] @ vector
            best = int(np.argmax(similarities))
            if similarities[best] >= threshold:
                sums[best] = sums[best] + vector
                centroid_rows[best] = unit(sums[best])
                continue
        sums.append(vector.astype(np.float64))
        centroid_rows[count] = unit(sums[-1])
    count = len(sums)
    # Clusters whose centroids are alike are one (the order of the vectors split them): merge the closest pair,
    # again, while it reaches the threshold. The similarities are computed once and a merge updates its cluster's
    # row and column only (recomputing them all per merge took ~10 s for 2,000 texts); a merged-away cluster's
    # are -inf, so the pairs keep their order and ties go the same way.
    alike = centroid_rows[:count] @ centroid_rows[:count].T
    np.fill_diagonal(alike, -np.inf)
    gone = np.zeros(count, dtype=bool)
    while count > 1:
        first, second = np.unravel_index(int(np.argmax(alike)), alike.shape)
        if alike[first, second] < threshold:
            break
        first, second = sorted((int(first), int(second)))
        sums[first] = sums[first] + sums[second]
        centroid_rows[first] = unit(sums[first])
        gone[second] = True
        alike[second, :] = alike[:, second] = -np.inf
        alike[first, :] = alike[:, first] = np.where(gone, -np.inf, centroid_rows[: len(sums)] @ centroid_rows[first])
        alike[first, first] = -np.inf
        count -= 1
    centroids = [centroid_rows[index] for index in np.flatnonzero(~gone)]
    # One reassignment pass: a vector seen early may fit a centroid formed later better.
    similarities = vectors @ np.stack(centroids).T
    nearest = np.argmax(similarities, axis=1)
    clusters = []
    for index in range(len(centroids)):
        members = [int(i) for i in np.flatnonzero(nearest == index) if similarities[i, index] >= threshold]
        if members:
            clusters.append(Cluster(members, unit(vectors[members].sum(axis=0))))
    clusters.sort(key=lambda c: (-len(c.members), c.members[0]))
    return clusters
