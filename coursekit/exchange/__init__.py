"""nbgrader's exchange as a class uses it: the instructor's loop (``commands``: ``course release``, ``collect``,
``return``; the exchange's root checked), nbgrader's exchange classes the course's configuration names (``classes``),
and the inbound read as untrusted input (``inbound``). Nothing is imported here."""
