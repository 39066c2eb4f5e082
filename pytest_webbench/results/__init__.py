"""What a run leaves on disk, the only interface between running and reporting: the manifest and
one record per trial (records.py), the records' index (record_index.py), Harbor's job results
(harbor_jobs.py) and a sequential run's decisions (decisions.py)."""
