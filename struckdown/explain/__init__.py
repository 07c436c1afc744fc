"""What `sd explain` shows, shared by the three front ends: the plan tree (`plan`), the
prompt-cache prediction of `sd explain --cache` (`cache`) and the words both use (`words`)."""
