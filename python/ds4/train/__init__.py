"""Training drafters for a target model (the ``train`` extra: torch). ``ds4 train-drafter``."""
