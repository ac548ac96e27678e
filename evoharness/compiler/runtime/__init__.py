"""Running a variant: the agent loop, the litellm model client and providers, the response cache, the Workload protocol."""
