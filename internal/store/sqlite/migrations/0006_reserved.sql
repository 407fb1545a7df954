-- Reserved: version 6 belongs to another change being merged at the same
-- time. This placeholder keeps the sequence contiguous until it lands; the
-- merge replaces this file with that change's 0006 (or drops it and
-- renumbers the following migrations). It changes nothing.
SELECT 1;
