"""Comparing stored runs (docs/compare.md): their figures side by side, and where two
transcripts first part (pure: it reads session documents, never a store)."""
