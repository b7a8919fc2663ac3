"""mirrorflow's Airflow operators."""
