"""Interviews: an instructor's list of questions, a candidate's link and an interviewer's link,
and everything the candidate does, kept as an append-only log of events (`model`), fanned out
live to the interviewer's page (`live`), and summed up at the end (`report`). No web framework
here: the web layer and the CLI both use it."""
