"""Pure, vectorised privacy accounting: the theoretical upper bounds.

Every function cites paper, theorem and equation on the line that uses it
(docs/theory.md section 2 holds the corrected statements).
"""
