"""What a journaled run keeps (SPEC §25): each tool effect once (`effects`, its journal
files `files`, the Dask workers' `shards`) and the slots an edited template's run reuses
(`rerun`)."""
