"""Pieces shared by the tests' stand-ins for torch tensors."""


class SharedProduct:
    """The errRatio a product written into a stand-in tensor leaves in it, kept in ``self.store`` (a dict
    shared with the views of the tensor's rows, as a product written into a buffer is seen through them)."""

    @property
    def err(self):
        return self.store["err"]

    @err.setter
    def err(self, v):
        self.store["err"] = v
