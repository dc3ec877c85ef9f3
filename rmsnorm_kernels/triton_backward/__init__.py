"""The Triton backward: one dx core shared by every variant (`dx`), three dγ strategies, one per file
(`atomic`, `workspace`, `persistent`), the column-sum kernel two of them finish with (`column_sum`) and the
autograd Function that joins the shared forward to a strategy (`function`)."""
