"""The Kubernetes side: the objects a job runs as (builders, isolation, hot volume pods), the API calls
that apply them (client, status_writer, events, api_session), the CR as read (resource, caches), the
job's control token Secret and the cluster's capabilities (cluster_checks)."""
