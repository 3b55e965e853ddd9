"""A question set a careless author might drop into the bank: its key says float16's largest value
is 65536.0; running the code prints 65504.0. Tests plant it to see the server hold it back."""

from __future__ import annotations


def wrong_key_set(question_id: str) -> str:
    return f"""\
title: Planted
description: A question whose key its run contradicts.
questions:
  - id: {question_id}
    kind: predict_output
    topic: float16-numerics
    difficulty: 1
    prompt: What does this print?
    code: |
      import torch
      print(torch.finfo(torch.float16).max)
    requires: cpu
    answer: "65536.0"
    explanation: The largest float16.
    source: tests
"""
