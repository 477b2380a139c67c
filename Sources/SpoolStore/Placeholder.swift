import SpoolRequest
public enum StorePlaceholder {}
