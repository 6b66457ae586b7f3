"""Each rank's output under ``collsim exec``: tagged per line as Open MPI's
``mpirun --tag-output`` tags it, and kept per rank."""

import io

__all__ = ["TaggedWriter", "JOB_ID"]

JOB_ID = 1  # the "1" of Open MPI's "[1,rank]" tag (its job number; one job per run)


class TaggedWriter(io.TextIOBase):
    """A ``sys.stdout`` for the run: a rank's text is tagged per line and kept per rank.

    ``rank_of()`` says which rank the calling thread belongs to, or ``None`` (collsim's
    own threads, whose text passes through untagged).  A line is written once complete;
    :meth:`finish` writes the unfinished ones.  ``muted()`` says the calling rank was
    stopped (the run ended without it): what it writes while it unwinds is dropped, as a
    killed process prints nothing more.

    >>> out = io.StringIO()
    >>> w = TaggedWriter("stdout", out, rank_of=lambda: 3, size=4)
    >>> _ = w.write("a\\nb"); _ = w.write("c\\n")
    >>> out.getvalue()
    '[1,3]<stdout>:a\\n[1,3]<stdout>:bc\\n'
    """

    def __init__(self, name, target, rank_of, size, echo=True, muted=lambda: False):
        self.name, self.target, self.rank_of, self.echo = name, target, rank_of, echo
        self.muted = muted
        self.texts = [[] for _ in range(size)]  # every piece a rank wrote, in order
        self._partial = [""] * size  # a rank's unfinished line

    @property
    def encoding(self):
        return getattr(self.target, "encoding", "utf-8")

    def isatty(self):
        return False  # the tags make it a log, as mpirun's output is

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        rank = self.rank_of()
        if rank is None:
            return self.target.write(text)
        if self.muted():
            return len(text)
        self.texts[rank].append(text)
        *lines, self._partial[rank] = (self._partial[rank] + text).split("\n")
        if self.echo:
            for line in lines:
                self.target.write(f"{self.tag(rank)}{line}\n")
        return len(text)

    def tag(self, rank):
        """``[1,rank]<stdout>:``, Open MPI's ``--tag-output`` prefix."""
        return f"[{JOB_ID},{rank}]<{self.name}>:"

    def flush(self):
        self.target.flush()

    def finish(self):
        """Write every rank's unfinished line (with a newline), then flush."""
        for rank, rest in enumerate(self._partial):
            if rest and self.echo:
                self.target.write(f"{self.tag(rank)}{rest}\n")
            self._partial[rank] = ""
        self.flush()

    def text(self, rank):
        return "".join(self.texts[rank])
