"""mirrorflow's Airflow triggers."""
