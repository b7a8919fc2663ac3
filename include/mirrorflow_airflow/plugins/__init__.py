"""mirrorflow's Airflow plugins."""
