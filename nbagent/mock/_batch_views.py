"""The batch side of `MockServer`: its batch clock and options, and views of the batches it holds
(see `nbagent.mock._batches`)."""

from __future__ import annotations

from collections import Counter

from ._batch_timeline import Provider
from ._batches import BatchCounts, BatchStore, MockBatch, check_duration


class BatchViews:
    """What `MockServer` says about, and does to, the provider batches it holds."""

    batch_store: BatchStore

    @property
    def batch_duration_s(self) -> float:
        """How long a batch created from now on runs, on the batch clock."""
        return self.batch_store.duration_s

    @batch_duration_s.setter
    def batch_duration_s(self, seconds: float) -> None:
        check_duration(seconds, None)
        self.batch_store.duration_s = float(seconds)

    @property
    def expire_after_s(self) -> float | None:
        """After how long a batch created from now on expires (None: it does not)."""
        return self.batch_store.expire_after_s

    @expire_after_s.setter
    def expire_after_s(self, seconds: float | None) -> None:
        check_duration(0.0, seconds)
        self.batch_store.expire_after_s = None if seconds is None else float(seconds)

    def advance_batches(self, seconds: float) -> None:
        """Move the batch clock forward, so batches progress without anyone waiting.

        Args:
            seconds: how far (0 or more).

        Raises:
            ValueError: ``seconds`` is negative or not a number.
        """
        self.batch_store.advance(seconds)

    @property
    def batch_counts(self) -> BatchCounts:
        """Create requests received, batches created and items submitted, per provider."""
        return self.batch_store.counts()

    @property
    def batches(self) -> list[MockBatch]:
        """Every batch created since the start (or `clear_batches`), oldest first, deleted
        ones included."""
        return [MockBatch(b, self.batch_store) for b in self.batch_store.all()]

    def batch(self, batch_id: str) -> MockBatch:
        """The batch with this id (Gemini's as ``batches/...``).

        Args:
            batch_id: the id the create answered with.

        Returns:
            A live view of the batch.

        Raises:
            KeyError: no batch has that id.
        """
        for found in self.batch_store.all():
            if found.id == batch_id:
                return MockBatch(found, self.batch_store)
        raise KeyError(f"The mock server holds no batch {batch_id!r}.")

    def submitted_ids(self, provider: Provider | None = None) -> Counter[str]:
        """How many times each custom id (Gemini: ``metadata.key``) was submitted in a batch.

        Args:
            provider: ``anthropic``, ``openai``, ``azure`` or ``gemini``; None for all.

        Returns:
            A `collections.Counter`: an id submitted twice counts 2.
        """
        return self.batch_store.submitted_ids(provider)

    def clear_batches(self) -> None:
        """Forget every batch, file and batch counter."""
        self.batch_store.clear()
