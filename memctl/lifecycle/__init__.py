"""Lifecycle: forgetting by policy, restore, consolidation, distillation, procedures (docs/LIFECYCLE.md, docs/CONSOLIDATION.md)."""
