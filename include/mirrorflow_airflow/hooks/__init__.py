"""mirrorflow's Airflow hooks."""
