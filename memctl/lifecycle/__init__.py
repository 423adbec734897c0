"""Lifecycle: forgetting by policy, restore, consolidation, distillation, procedures (issue 8)."""
