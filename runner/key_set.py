"""A compact set of the keys seen in an input, to find a duplicate among a million without keeping the keys.

A Python ``set`` of a million key strings takes about a hundred megabytes;
this keeps each key's 64-bit hash in one flat array (an open-addressed
table, at most half full): 16 MB for a million keys. Two different keys may
share a hash, so a hit only says *maybe seen*: the caller makes sure (by
reading the input again up to that key), which for a real duplicate it does
anyway to name the first line.
"""

from __future__ import annotations

from array import array

#: Slots of a new set; it doubles whenever it is half full.
FIRST_SLOTS = 1 << 16


class KeySet:
    """The keys added so far, as their hashes; ``add`` says whether a key may have been added before."""

    def __init__(self) -> None:
        self._slots = array("q", bytes(8 * FIRST_SLOTS))
        self._mask = FIRST_SLOTS - 1
        self._used = 0

    def __len__(self) -> int:
        return self._used

    def add(self, key: str) -> bool:
        """Add ``key``; False when its hash was there already (the key was added before, or shares its hash)."""
        digest = hash(key) or 1  # 0 marks an empty slot
        slots, mask = self._slots, self._mask
        slot = digest & mask
        while True:
            found = slots[slot]
            if found == digest:
                return False
            if not found:
                slots[slot] = digest
                self._used += 1
                if 2 * self._used > mask:
                    self._grow()
                return True
            slot = (slot + 1) & mask

    def _grow(self) -> None:
        old = self._slots
        size = 2 * (self._mask + 1)
        self._slots, self._mask = array("q", bytes(8 * size)), size - 1
        slots, mask = self._slots, self._mask
        for digest in old:
            if digest:
                slot = digest & mask
                while slots[slot]:
                    slot = (slot + 1) & mask
                slots[slot] = digest
