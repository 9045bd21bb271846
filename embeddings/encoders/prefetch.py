"""Tokenization off the critical path: the next chunk of sentences is tokenized while the device runs this one.

Why: a fast tokenizer's batch call takes about a second for 20,000 sentences (issue 39: 19,700 sentences/s on the
GPU machine's host), while an H200 encodes them in about as long; done up front, the GPU waits for all of it.
The tokenizer's batch call runs in Rust without the GIL, so a background thread overlaps it with the forward
passes the main thread queues.

Where: on CUDA only, in chunks of ``CHUNK`` sentences (the first chunk is the only tokenization the GPU waits
for); each chunk is sorted by length and batched on its own (``BaseEncoder._batches``), so padding grows only
at chunk borders. On the CPU the forward already keeps every core busy (a thread would take cores from the
matmuls), so the whole list is tokenized once and sorted as a whole: the least padding, the old behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

CHUNK = 4096  # sentences per background tokenizer call on CUDA


class TokenizedChunks:
    """``(offset, token ids)`` of consecutive chunks of ``sentences``; ``len`` is the number of chunks.

    Args:
        tokenize: the encoder's ``tokenize`` (one batch call per chunk).
        sentences: the sentences (unique, in the caller's order).
        chunk: sentences per chunk; ``None``: one chunk, tokenized when first iterated, in this thread.
    """

    def __init__(self, tokenize, sentences: Sequence[str], chunk: int | None) -> None:
        self.tokenize, self.sentences = tokenize, list(sentences)
        self.chunk = chunk if chunk and len(self.sentences) > chunk else None

    def __len__(self) -> int:
        return 1 if self.chunk is None else -(-len(self.sentences) // self.chunk)

    def __iter__(self) -> Iterator[tuple[int, list[list[int]]]]:
        if self.chunk is None:
            yield 0, self.tokenize(self.sentences)
            return
        starts = range(0, len(self.sentences), self.chunk)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sts-tokenize")
        try:  # one worker: chunks are tokenized in order, each while the batches of the previous ones run
            futures: list[Future] = [pool.submit(self.tokenize, self.sentences[s:s + self.chunk]) for s in starts]
            for start, future in zip(starts, futures, strict=True):
                yield start, future.result()
        finally:  # an early stop (a signal, an error in a batch) drops the chunks not started yet
            pool.shutdown(wait=True, cancel_futures=True)


def tokenized_chunks(encoder, sentences: Sequence[str]) -> TokenizedChunks:
    """The chunks ``encoder`` tokenizes ``sentences`` in: several, ahead in a thread, on CUDA; one elsewhere."""
    device = getattr(encoder, "device", None)
    chunk = CHUNK if getattr(device, "type", "cpu") == "cuda" else None
    return TokenizedChunks(encoder.tokenize, sentences, chunk)
