"""A finding of the planner's rules: one broken rule or one recommendation not followed."""

from dataclasses import dataclass

__all__ = ["Finding"]


@dataclass(frozen=True)
class Finding:
    """One broken rule (an error) or one recommendation not followed (a warning)."""

    rule: str  # identifier from the module table, stable for code and JSON
    message: str  # what is wrong, with the numbers
    hint: str = ""  # the nearest valid choices
    severity: str = "error"  # "error" or "warning"

    def to_dict(self):
        return {"rule": self.rule, "message": self.message, "hint": self.hint}

    def __str__(self):
        return f"{self.rule}: {self.message}" + (f"\n  hint: {self.hint}" if self.hint else "")
