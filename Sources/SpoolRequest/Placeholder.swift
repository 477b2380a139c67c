public enum RequestPlaceholder {}
