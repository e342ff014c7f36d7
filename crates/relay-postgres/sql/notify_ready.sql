-- Delivered when the batch commits; several in one transaction fold into one.
NOTIFY relay_ready
