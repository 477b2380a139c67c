public enum SchedulerPlaceholder {}
