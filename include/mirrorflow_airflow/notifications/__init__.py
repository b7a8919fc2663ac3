"""mirrorflow's Airflow notifications."""
