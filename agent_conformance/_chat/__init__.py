"""The chat machine: `trio-agents chat` driven over pipes as a person types (rules C1-C4 and
L10 of docs/contract.md)."""
